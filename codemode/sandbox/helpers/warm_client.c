/* warm_client SOCKET N FALLBACK... [HOST_ARG...]: start a code-mode host from a warm one.
 *
 * Codex starts `codex-code-mode-host` for every session and waits for it to answer; a
 * Python host needs ~80 ms to import what it serves with, Codex's own host ~5 ms. The
 * shim `codemode.codex_host.warm.beside` writes with `warm=True` runs this program instead of
 * the host: it connects to the warm host server on SOCKET (`codex_host/warm/server.py`),
 * makes sure the server runs as this same user (SO_PEERCRED), and hands it this
 * process's stdin, stdout, stderr and working folder (SCM_RIGHTS) with HOST_ARGs. A host
 * process the server prepared in advance then serves them; this program stays until
 * that host exits and exits with its status. Killing this program ends that host (it
 * sees the connection close).
 *
 * When there is no server (or it runs as another user, refuses the arguments, or
 * anything here fails before the handover), it execs FALLBACK... HOST_ARG... instead,
 * (N is the number of FALLBACK words): the host started as usual. No byte of stdin is
 * read before the handover is accepted, so the fallback gets the whole stream.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAGIC "codemode-warm-host/1"
#define MAX_REQUEST 65536

static char **fallback_argv;

static void __attribute__((noreturn)) fall_back(void) {
    execv(fallback_argv[0], fallback_argv);
    fprintf(stderr, "%s: %s\n", fallback_argv[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

/* Reads exactly n bytes; 0 on a short read (EOF or error). */
static int read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 0;
        p += got;
        n -= (size_t)got;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fputs("usage: warm_client SOCKET N FALLBACK... [HOST_ARG...]\n", stderr);
        return 125;
    }
    long n = strtol(argv[2], NULL, 10);
    if (n < 1 || n > argc - 3) {
        fputs("warm_client: N must count the FALLBACK words\n", stderr);
        return 125;
    }
    /* FALLBACK... HOST_ARG... are already in that order from argv[3]. */
    fallback_argv = argv + 3;
    char **host_args = argv + 3 + n;
    int host_argc = argc - 3 - (int)n;

    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(argv[1]) >= sizeof addr.sun_path) fall_back();
    strcpy(addr.sun_path, argv[1]);
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) fall_back();

    /* Only a server of this user gets our stdin and stdout: anyone could have made a
     * socket at that path if its folder was not ours. */
    struct ucred peer;
    socklen_t len = sizeof peer;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || len != sizeof peer ||
        peer.uid != getuid()) {
        close(sock);
        fall_back();
    }

    /* The request: MAGIC, NUL, the number of HOST_ARGs, NUL, each HOST_ARG and NUL. */
    static char request[MAX_REQUEST];
    size_t used = 0;
    int w = snprintf(request, sizeof request, "%s%c%d%c", MAGIC, 0, host_argc, 0);
    if (w < 0) fall_back();
    used = (size_t)w;
    for (int i = 0; i < host_argc; i++) {
        size_t l = strlen(host_args[i]) + 1;
        if (used + l > sizeof request) fall_back();
        memcpy(request + used, host_args[i], l);
        used += l;
    }
    int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0) fall_back();
    int fds[4] = {0, 1, 2, cwd};
    union {
        char buf[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = request, .iov_len = used};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t sent;
    do sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    close(cwd);
    char answer;
    if (sent != (ssize_t)used || !read_all(sock, &answer, 1) || answer != 'A') {
        close(sock); /* refused, or the server went: nothing was read from stdin */
        fall_back();
    }
    /* The host has our stdio now: ours are closed so that its ends decide when the
     * client sees end of file. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; fd++) {
        if (null >= 0) dup2(null, fd);
        else close(fd);
    }
    int32_t status;
    if (!read_all(sock, &status, sizeof status)) return 1; /* the server itself went */
    return status >= 0 && status <= 255 ? status : 1;
}
