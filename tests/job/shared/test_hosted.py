"""job.shared.hosted: the pool a dagger's jobs run in, and how many tasks a heavy dagger's read may take."""

from __future__ import annotations

from job.shared.hosted import LIGHT_POOL, heavy_task_cap, pool_name


def test_light_daggers_share_one_pool_and_the_others_have_their_own() -> None:
    assert pool_name("a", light=True) == pool_name("b", light=True) == LIGHT_POOL
    assert pool_name("a") == "dagger-a" != pool_name("b")


def test_a_heavy_read_leaves_one_slot_free_from_three_local_slots_up() -> None:
    assert [heavy_task_cap("local[3]", n) for n in (1, 2, 3, 4, 8)] == [0, 0, 2, 3, 7]
    assert heavy_task_cap("spark://127.0.0.1:7077", 8) == 0  # on a cluster every slot is a core


def test_a_host_on_local_star_has_one_slot_more_than_the_cores() -> None:
    from job.shared.host import host_master

    assert host_master("local[*]", 2) == "local[3]" and host_master("local[ * ]", 0) == "local[2]"
    assert [host_master(m, 2) for m in ("local[2]", "local", "spark://127.0.0.1:7077")] == [
        "local[2]",
        "local",
        "spark://127.0.0.1:7077",
    ]
