/* The client of job/shared/forkserver.py in C (about 0.3 MB where the Python client takes 10): see
 * job/shared/forkclient.py, which it mirrors. Built by the fork server at start with the system's cc.
 *
 *   forkclient -m MODULE [ARGS]   with DAGGERS_FORK_SERVER (socket) and DAGGERS_PYTHON (interpreter)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;
static volatile pid_t child = 0;

/* SIGINT only while the child is in this client's process group: a child that leads a group of its own
   (PySpark's daemons) would not get a terminal's Ctrl-C either. */
static void forward(int sig) {
    if (child > 0 && (sig != SIGINT || getpgid(child) == getpgrp())) kill(child, sig);
}

static sigset_t held;  /* SIGTERM and SIGINT, blocked until the child is known (then forwarded) */

/* The signals this client was started with ignored (an exec keeps SIG_IGN): the child ignores them too and
   the client never catches them, as `python -m MODULE` started here would (the JVM ignores SIGINT). */
static const int passed[] = {SIGINT, SIGTERM, SIGHUP};
static int ignored[sizeof passed / sizeof passed[0]];

static void run_locally(char **argv) {
    sigprocmask(SIG_UNBLOCK, &held, NULL);  /* a signal that came meanwhile now acts on this process */
    const char *python = getenv("DAGGERS_PYTHON");
    if (python == NULL || *python == '\0') python = "python3";
    setenv("PYTHONSAFEPATH", "1", 1);  /* `python -m` would put the working folder first on the import path */
    argv[0] = (char *)python;
    execvp(python, argv);
    perror("forkclient: exec");
    _exit(127);
}

static char *buf = NULL;
static size_t len = 0, cap = 0;

static int append(const char *s) {
    size_t n = strlen(s) + 1;
    if (len + n > cap) {
        size_t want = (cap ? cap * 2 : 65536);
        while (want < len + n) want *= 2;
        char *grown = realloc(buf, want);
        if (grown == NULL) return -1;
        buf = grown; cap = want;
    }
    memcpy(buf + len, s, n);
    len += n;
    return 0;
}

int main(int argc, char **argv) {
    sigemptyset(&held);
    sigaddset(&held, SIGTERM);
    sigaddset(&held, SIGINT);
    sigprocmask(SIG_BLOCK, &held, NULL);
    const char *path = getenv("DAGGERS_FORK_SERVER");
    if (path == NULL || *path == '\0' || argc < 3 || strcmp(argv[1], "-m") != 0) run_locally(argv);
    char cwd[4096], count[32];
    if (getcwd(cwd, sizeof cwd) == NULL) run_locally(argv);
    char ignoring[64] = "";
    for (size_t i = 0; i < sizeof passed / sizeof passed[0]; i++) {
        struct sigaction now;
        ignored[i] = sigaction(passed[i], NULL, &now) == 0 && now.sa_handler == SIG_IGN;
        if (ignored[i]) snprintf(ignoring + strlen(ignoring), sizeof ignoring - strlen(ignoring), "%s%d",
                                 *ignoring ? "," : "", passed[i]);
    }
    snprintf(count, sizeof count, "%d", argc - 3);
    if (append(argv[2]) || append(cwd) || append(ignoring) || append(count)) run_locally(argv);
    for (int i = 3; i < argc; i++) if (append(argv[i])) run_locally(argv);
    for (char **e = environ; *e != NULL; e++) if (append(*e)) run_locally(argv);

    int sock = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
    if (sock < 0 || connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) run_locally(argv);

    int fds[3] = {0, 1, 2};
    char control[CMSG_SPACE(sizeof fds)];
    memset(control, 0, sizeof control);
    struct iovec iov = {buf, len};
    struct msghdr msg = {0};
    msg.msg_iov = &iov; msg.msg_iovlen = 1;
    msg.msg_control = control; msg.msg_controllen = sizeof control;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET; cm->cmsg_type = SCM_RIGHTS; cm->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
    if (sendmsg(sock, &msg, 0) < 0) { close(sock); run_locally(argv); }

    char reply[64];
    ssize_t n = recv(sock, reply, sizeof reply - 1, 0);
    if (n <= 0) { close(sock); run_locally(argv); }  /* refused: run the module here */
    reply[n] = '\0';
    /* the module ran (a server of an older protocol sent the PID after the child's end): never run it again */
    if (strncmp(reply, "exit ", 5) == 0) return atoi(reply + 5);
    child = (pid_t)atoi(reply);
    if (child <= 0) { close(sock); run_locally(argv); }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < sizeof passed / sizeof passed[0]; i++)
        if (!ignored[i] && passed[i] != SIGHUP) sigaction(passed[i], &sa, NULL);
    sigprocmask(SIG_UNBLOCK, &held, NULL);  /* one that came before the child's PID goes to it now */
    for (;;) {
        n = recv(sock, reply, sizeof reply - 1, 0);
        if (n < 0 && errno == EINTR) continue;
        break;
    }
    if (n > 5 && strncmp(reply, "exit ", 5) == 0) { reply[n] = '\0'; return atoi(reply + 5); }
    return 143;
}
