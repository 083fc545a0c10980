"""What each lookup answered for a micro-batch, kept in the checkpoint until the next batch, so that a batch
Spark runs again after a crash is enriched with the same values and writes the same rows.

``<checkpoint>/lookups/<batch id>/`` holds one Arrow file per lookup: its key columns, its output columns,
and ``__found`` / ``__failed``, one row per distinct key of the batch; ``query`` names the streaming query
(Spark's id in ``<checkpoint>/spark/metadata``), so the files of a checkpoint made again are not reused.
A batch's folder is written before its rows reach the sinks and removed when the next batch is written
(Spark runs a batch only after the one before it was committed).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather

FOUND, FAILED = "__found", "__failed"


class ReplayStore:
    """The lookups' answers per micro-batch under ``folder``; ``spark_dir`` is the query's checkpoint."""

    def __init__(self, folder: Path, spark_dir: Path | None = None) -> None:
        self.folder = Path(folder)
        self.spark_dir = spark_dir

    def _query_id(self) -> str:
        if self.spark_dir is None:
            return ""
        try:
            return str(json.loads((self.spark_dir / "metadata").read_text()).get("id", ""))
        except (OSError, ValueError):
            return ""

    def load(self, batch_id: int) -> dict[str, pa.Table] | None:
        """Return the answers kept for ``batch_id`` (lookup name -> table), or None when there are none for
        this query."""
        folder = self.folder / str(batch_id)
        try:
            meta = json.loads((folder / "batch.json").read_text())
        except (OSError, ValueError):
            return None
        if meta.get("query") != self._query_id():
            return None
        try:
            return {name: feather.read_table(folder / f"{i}.arrow") for i, name in enumerate(meta["lookups"])}
        except (OSError, KeyError, pa.ArrowInvalid):
            return None

    def save(self, batch_id: int, answers: dict[str, pa.Table]) -> None:
        """Keep ``answers`` (lookup name -> table) for ``batch_id`` and remove those of every other batch."""
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.folder / str(batch_id)
        tmp = self.folder / f".{batch_id}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for i, table in enumerate(answers.values()):
            feather.write_feather(table, tmp / f"{i}.arrow", compression="uncompressed")
        (tmp / "batch.json").write_text(json.dumps({"query": self._query_id(), "lookups": list(answers)}))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in self.folder.iterdir():  # batches before were committed; later ones are from an older query
            if old.name != final.name and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
