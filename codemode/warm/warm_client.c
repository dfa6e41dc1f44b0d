/* warm_client SOCKET KEY N COMMAND... [ARG...]: run COMMAND ARG... through this user's
 * warm server (codemode/warm/), or exec it when none serves it.
 *
 * Started with a first argument that is not an absolute path (as Codex starts its host:
 * `codex-code-mode-host --listen grpc+stdio://`, or with no argument), it takes SOCKET
 * KEY N COMMAND... from the file named as its own executable plus ".args" (each word
 * ended by a NUL), and ARG... from its own arguments: beside Codex
 * (``codemode.codex_host.warm.beside``) this program is the host itself, with no shell
 * started in front of it. That file is written by whoever wrote the program there.
 *
 * The compiled twin of ``codemode.warm.client`` (docs/warm.md), for callers that start
 * a command often and wait for it: the shim beside Codex's binary
 * (``codemode.codex_host.warm.beside``) execs it for every session's code-mode host. It
 * speaks the warm protocol (``codemode/warm/protocol.py``): one request with the
 * command's argv, this process's whole environment, umask, resource limits, ignored and
 * blocked signals, and its descriptors 0-2 and working folder (SCM_RIGHTS); then it
 * passes on the signals it gets, one byte each, and ends as the run ended.
 *
 * SOCKET and KEY are the server's place and its installation's facts (``place.py``),
 * as the shim's writer found them. Whenever anything is off before the server accepts
 * (no server, one of another user or unlike this process (confined further, another
 * priority...: ``place.process_facts``), a refusal: another installation, environment
 * or anything it could not take over exactly), this program execs COMMAND ARG... itself
 * (an absolute path: a name without a folder is not run, it would be the working
 * folder's):
 * that is the `interpreter` launcher, which goes warm by the standard library client or
 * starts cold. N counts the words of COMMAND. No byte of stdin is read before the
 * server accepts, so the exec'd command gets the whole stream.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAGIC "codemode-warm/2" /* and its NUL: 16 bytes, as protocol.MAGIC */
#define FIRST_CHUNK 65536       /* what the server reads with the descriptors */
#define LOST_STATUS 70          /* client.LOST_STATUS: the server ended mid-run */

extern char **environ;

static char **command;
static int sock = -1;
static sigset_t forwarded, original; /* original: the caller's mask */
/* protocol.INHERITED: dispositions a cold process would inherit. */
static const int inherited[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE,
                                SIGUSR1, SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU};
/* protocol.FORWARDED: signals passed on to the run. */
static const int passed_on[] = {SIGINT, SIGQUIT, SIGHUP, SIGWINCH, SIGTSTP,
                                SIGCONT, SIGTERM, SIGUSR1, SIGUSR2};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void __attribute__((noreturn)) run_it_ourselves(void) {
    if (sock >= 0) close(sock);
    sigprocmask(SIG_SETMASK, &original, NULL); /* what came meanwhile is the exec's */
    if (command[0][0] != '/') {
        /* execv does not search PATH: a name without a folder would be the working
         * folder's (Codex starts its host in the workspace). */
        fprintf(stderr, "%s: not an absolute path: not run\n", command[0]);
        _exit(127);
    }
    execv(command[0], command);
    fprintf(stderr, "%s: %s\n", command[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#define PEERPIDFD 77 /* SO_PEERPIDFD, Linux 6.5: the listener's pidfd */

/* place.process_facts: what the server compares of its callers, compared here of the
 * server. */
static const char *const status_fields[] = {
    "Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
    "NoNewPrivs", "Seccomp", "Seccomp_filters", "Cpus_allowed_list", "Mems_allowed_list"};
static const char *const proc_files[] = {"cgroup", "oom_score_adj", "personality"};
static const char *const namespaces[] = {"cgroup", "ipc", "mnt", "net",
                                         "pid", "time", "user", "uts"};

/* The file's first room - 1 bytes, NUL-ended; their count, or -1. */
static ssize_t slurp(const char *path, char *out, size_t room) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t have = 0;
    ssize_t got = 0;
    while (have < room - 1 && (got = read(fd, out + have, room - 1 - have)) > 0)
        have += (size_t)got;
    close(fd);
    out[have] = '\0';
    return got < 0 ? -1 : (ssize_t)have;
}

/* The value of the line "NAME:" of a /proc status text (its length in *len), or NULL. */
static const char *status_field(const char *text, const char *name, size_t *len) {
    size_t n = strlen(name);
    for (const char *line = text; *line;) {
        const char *end = strchrnul(line, '\n');
        if ((size_t)(end - line) > n && strncmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            *len = (size_t)(end - v);
            return v;
        }
        line = *end ? end + 1 : end;
    }
    return NULL;
}

/* Fields 40 and 41 of a /proc/PID/stat (the real-time priority and scheduling policy)
 * into OUT, as text; 0 when unreadable. */
static int sched_of(const char *path, char *out, size_t room) {
    static char text[4096];
    if (slurp(path, text, sizeof text) < 0) return 0;
    char *p = strrchr(text, ')'), *save = NULL, *rt = NULL, *policy = NULL;
    if (p == NULL) return 0;
    int i = 0; /* field 3 (the state) first */
    for (char *t = strtok_r(p + 1, " \n", &save); t; t = strtok_r(NULL, " \n", &save), i++) {
        if (i == 37) rt = t;
        if (i == 38) policy = t;
    }
    if (rt == NULL || policy == NULL) return 0;
    snprintf(out, room, "%s %s", policy, rt);
    return 1;
}

/* The I/O priority (`ionice`) of PID (0: this process), which a fork takes and no /proc
 * file says (place.ioprio): -2 where this kernel has none (ENOSYS), -1 where it cannot
 * be read (then unlike: nothing compared is nothing handed over). */
static long ioprio_of(pid_t pid) {
#ifdef SYS_ioprio_get
    long got = syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, (int)pid);
    if (got >= 0) return got;
    return errno == ENOSYS ? -2 : -1;
#else
    (void)pid;
    return -1;
#endif
}

/* Whether the process that listens on SOCK (PID) differs from this one in what the
 * server compares of its callers (its confinement: no-new-privileges, seccomp,
 * namespaces, capabilities; its groups, priority, scheduling policy and I/O priority,
 * control group...). A real server
 * refuses such a caller anyway; a program confined further that could write the
 * runtime folder and listens there is handed nothing (neither this environment nor
 * our descriptors). Gone, unreadable or pid 0 (another pid namespace): unlike. */
static int unlike_us(int fd, pid_t pid) {
    int pidfd = -1;
    socklen_t len = sizeof pidfd;
    if (getsockopt(fd, SOL_SOCKET, PEERPIDFD, &pidfd, &len) != 0) {
        if (errno != ENOPROTOOPT) return 1; /* the listener has ended */
        pidfd = -1;
    }
    int unlike = 1;
    static char ours[16384], theirs[16384];
    char path[64];
    if (pid <= 0) goto done;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (slurp("/proc/self/status", ours, sizeof ours) < 0 ||
        slurp(path, theirs, sizeof theirs) < 0)
        goto done;
    for (size_t i = 0; i < COUNT(status_fields); i++) {
        size_t a = 0, b = 0;
        const char *x = status_field(ours, status_fields[i], &a);
        const char *y = status_field(theirs, status_fields[i], &b);
        if ((x == NULL) != (y == NULL) || a != b || (x && memcmp(x, y, a) != 0)) goto done;
    }
    for (size_t i = 0; i < COUNT(proc_files); i++) {
        char mine[64];
        snprintf(mine, sizeof mine, "/proc/self/%s", proc_files[i]);
        snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, proc_files[i]);
        ssize_t a = slurp(mine, ours, 4097), b = slurp(path, theirs, 4097);
        if (a < 0 || b < 0 || a != b || memcmp(ours, theirs, (size_t)a) != 0) goto done;
    }
    errno = 0;
    int nice_ours = getpriority(PRIO_PROCESS, 0);
    int nice_theirs = getpriority(PRIO_PROCESS, (id_t)pid);
    if (errno != 0 || nice_ours != nice_theirs) goto done;
    char sched_ours[64], sched_theirs[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!sched_of("/proc/self/stat", sched_ours, sizeof sched_ours) ||
        !sched_of(path, sched_theirs, sizeof sched_theirs) ||
        strcmp(sched_ours, sched_theirs) != 0)
        goto done;
    long io_ours = ioprio_of(0), io_theirs = ioprio_of(pid);
    if (io_ours == -1 || io_theirs == -1 || io_ours != io_theirs) goto done;
    for (size_t i = 0; i < COUNT(namespaces); i++) {
        char mine[64];
        snprintf(mine, sizeof mine, "/proc/self/ns/%s", namespaces[i]);
        snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, namespaces[i]);
        ssize_t a = readlink(mine, ours, 255);
        int a_missing = a < 0 && errno == ENOENT;
        ssize_t b = readlink(path, theirs, 255);
        int b_missing = b < 0 && errno == ENOENT;
        if (a_missing && b_missing) continue;
        if (a < 0 || b < 0 || a != b || memcmp(ours, theirs, (size_t)a) != 0) goto done;
    }
    /* Still that process: its pid was not reused while we read. */
    if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) != 0) goto done;
    unlike = 0;
done:
    if (pidfd >= 0) close(pidfd);
    return unlike;
}

/* A growing buffer for the request; any allocation failure runs the command cold. */
static char *buf;
static size_t used, room;

static void put(const char *data, size_t n) {
    if (used + n > room) {
        size_t want = room ? room : 65536;
        while (used + n > want) want *= 2;
        char *grown = realloc(buf, want);
        if (grown == NULL) run_it_ourselves();
        buf = grown;
        room = want;
    }
    memcpy(buf + used, data, n);
    used += n;
}

static void puts_(const char *s) { put(s, strlen(s)); }

static void put_number(long long n) {
    char text[32];
    int w = snprintf(text, sizeof text, "%lld", n);
    put(text, (size_t)w);
}

/* A field of the request and the NUL that ends it (protocol.Request.encode: no field
 * can hold a NUL, so none needs escaping). */
static void put_field(const char *s) { put(s, strlen(s) + 1); }

/* Whether codemode's config file (place._config_says: $CODEMODE_HOME/config.toml, else
 * ~/.codemode/config.toml) holds the word "warm" anywhere in its first MiB. */
static int config_mentions_warm(void) {
    const char *home = getenv("CODEMODE_HOME");
    char path[4096];
    int w;
    if (home && *home) {
        w = snprintf(path, sizeof path, "%s/config.toml", home);
    } else {
        const char *user = getenv("HOME");
        if (!user || !*user) return 1; /* the launcher finds the home its own way */
        w = snprintf(path, sizeof path, "%s/.codemode/config.toml", user);
    }
    if (w < 0 || (size_t)w >= sizeof path) return 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return errno != ENOENT; /* no file: the default (on) */
    static char data[1 << 20];
    size_t have = 0;
    ssize_t got;
    while (have < sizeof data && (got = read(fd, data + have, sizeof data - have)) > 0)
        have += (size_t)got;
    close(fd);
    return memmem(data, have, "warm", 4) != NULL;
}

static int read_all(int fd, void *to, size_t n) {
    char *p = to;
    while (n) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 0;
        p += got;
        n -= (size_t)got;
    }
    return 1;
}

/* A reply: KIND and a big-endian 32-bit number; 0 when something else came. */
static int read_reply(char kind, int32_t *number) {
    unsigned char data[5];
    if (!read_all(sock, data, sizeof data) || data[0] != (unsigned char)kind) return 0;
    *number = (int32_t)((uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 |
                        (uint32_t)data[3] << 8 | (uint32_t)data[4]);
    return 1;
}

static void pass_on(int number) {
    int saved = errno;
    unsigned char byte = (unsigned char)number;
    send(sock, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (number == SIGTSTP) {
        /* Stop as a cold process would (the run is being stopped); `fg` sends SIGCONT,
         * which is passed on, and this handler is back. */
        sigset_t tstp;
        sigemptyset(&tstp);
        sigaddset(&tstp, SIGTSTP);
        signal(SIGTSTP, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, &tstp, NULL);
        raise(SIGTSTP);
        struct sigaction again = {.sa_handler = pass_on, .sa_flags = SA_RESTART};
        sigaction(SIGTSTP, &again, NULL);
    }
    errno = saved;
}

static void __attribute__((noreturn)) die_of(int number) {
    signal(number, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, number);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    raise(number);
    _exit(128 + number);
}

static int ignored(int number) {
    struct sigaction now;
    return sigaction(number, NULL, &now) == 0 && now.sa_handler == SIG_IGN;
}

/* argv with the words of the file beside this program put after argv[0] (see the top
 * of this file), or NULL when it cannot be read. */
static char **with_words_beside(int argc, char **argv, int *count) {
    static char path[4096 + 8], data[1 << 16];
    ssize_t n = readlink("/proc/self/exe", path, 4096);
    if (n <= 0 || n >= 4096) return NULL;
    memcpy(path + n, ".args", sizeof ".args");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return NULL;
    size_t have = 0;
    ssize_t got;
    while (have < sizeof data && (got = read(fd, data + have, sizeof data - have)) > 0)
        have += (size_t)got;
    close(fd);
    if (have == 0 || have == sizeof data || data[have - 1] != '\0') return NULL;
    int words = 0;
    for (size_t i = 0; i < have; i++) words += data[i] == '\0';
    char **out = calloc((size_t)words + (size_t)argc + 1, sizeof *out);
    if (out == NULL) return NULL;
    int k = 0;
    out[k++] = argv[0];
    for (char *word = data; word < data + have; word += strlen(word) + 1) out[k++] = word;
    for (int i = 1; i < argc; i++) out[k++] = argv[i];
    out[k] = NULL;
    *count = k;
    return out;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] != '/') {
        argv = with_words_beside(argc, argv, &argc);
        if (argv == NULL) {
            fputs("codemode: cannot read the .args file beside this program\n", stderr);
            return 127;
        }
    }
    if (argc < 5) {
        fputs("usage: warm_client SOCKET KEY N COMMAND... [ARG...]\n", stderr);
        return 125;
    }
    long n = strtol(argv[3], NULL, 10);
    if (n < 1 || n > argc - 4) {
        fputs("warm_client: N must count the COMMAND words\n", stderr);
        return 125;
    }
    command = argv + 4; /* COMMAND... ARG...: the run's argv, and the exec's */
    int words = argc - 4;

    /* What the request says of this process, read before anything here changes it. */
    sigprocmask(SIG_BLOCK, NULL, &original);
    /* CODEMODE_WARM=0 (place.py's words for off) opts out here too; unset or empty, a
     * config file that so much as mentions warm is left to the launcher to read. */
    const char *wanted = getenv("CODEMODE_WARM");
    static const char *const off[] = {"0", "false", "no", "off"};
    if (wanted && *wanted) {
        for (size_t i = 0; i < COUNT(off); i++)
            if (strcasecmp(wanted, off[i]) == 0) run_it_ourselves();
    } else if (config_mentions_warm()) {
        run_it_ourselves();
    }
    mode_t mask = umask(022);
    umask(mask);
    sigemptyset(&forwarded);
    for (size_t i = 0; i < COUNT(passed_on); i++) sigaddset(&forwarded, passed_on[i]);
    /* Held until the server has the command (then passed on) or not (then the exec's). */
    sigprocmask(SIG_BLOCK, &forwarded, NULL);

    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(argv[1]) >= sizeof addr.sun_path) run_it_ourselves();
    strcpy(addr.sun_path, argv[1]);
    /* A closed 0, 1 or 2 would be the socket's number, and the run's stream: a cold
     * start (the exec) keeps it closed, as it is. */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0) run_it_ourselves();
    sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) run_it_ourselves();
    /* Only a server of this user gets our descriptors and environment. */
    struct ucred peer;
    socklen_t len = sizeof peer;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || len != sizeof peer ||
        peer.uid != geteuid() || unlike_us(sock, peer.pid))
        run_it_ourselves();

    put(MAGIC, sizeof MAGIC); /* with its NUL */
    put("\0\0\0\0", 4);       /* the body's length, filled in below */
    size_t body = used;
    put_field(argv[2]); /* the key */
    put_number(mask);
    put("", 1);
    for (int r = 0, first = 1; r < RLIM_NLIMITS; r++) {
        struct rlimit limit;
        if (getrlimit(r, &limit) != 0) continue;
        if (!first) puts_(";");
        first = 0;
        put_number(r);
        puts_(",");
        put_number((long long)limit.rlim_cur); /* RLIM_INFINITY: -1, as Python says */
        puts_(",");
        put_number((long long)limit.rlim_max);
    }
    put("", 1);
    for (size_t i = 0, first = 1; i < COUNT(inherited); i++) {
        if (!ignored(inherited[i])) continue;
        if (!first) puts_(",");
        first = 0;
        put_number(inherited[i]);
    }
    put("", 1);
    for (int s = 1, first = 1; s < NSIG; s++) {
        if (sigismember(&original, s) != 1) continue;
        if (!first) puts_(",");
        first = 0;
        put_number(s);
    }
    put("", 1);
    put_number(words);
    put("", 1);
    for (int i = 0; i < words; i++) put_field(command[i]);
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq == NULL || eq == *e) continue;
        put_field(*e);
    }
    used--; /* fields are separated by NULs: none after the last */
    uint32_t length = (uint32_t)(used - body);
    unsigned char be[4] = {length >> 24, length >> 16, length >> 8, length};
    memcpy(buf + body - 4, be, 4);

    int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0) run_it_ourselves();
    int fds[4] = {0, 1, 2, cwd};
    union {
        char space[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    size_t chunk = used < FIRST_CHUNK ? used : FIRST_CHUNK;
    struct iovec iov = {.iov_base = buf, .iov_len = chunk};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space,
                         .msg_controllen = sizeof control.space};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t sent;
    do sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    close(cwd);
    if (sent <= 0) run_it_ourselves();
    for (size_t at = (size_t)sent; at < used;) {
        ssize_t more = send(sock, buf + at, used - at, MSG_NOSIGNAL);
        if (more < 0 && errno == EINTR) continue;
        if (more <= 0) {
            /* Whether the command started is the reply's to say: a quick run can end,
             * and the server close the connection, before a late send returns. A
             * request cut short is refused. */
            shutdown(sock, SHUT_WR);
            break;
        }
        at += (size_t)more;
    }
    free(buf);
    int32_t pid;
    if (!read_reply('A', &pid)) run_it_ourselves(); /* refused: nothing ran */

    /* The run has our descriptors: ours go, so that its ends alone decide when a
     * reader of our stdout sees its end. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; fd++) {
        if (null >= 0) dup2(null, fd);
        else close(fd);
    }
    for (size_t i = 0; i < COUNT(passed_on); i++) {
        if (ignored(passed_on[i])) continue; /* ignored here: the run ignores it too */
        struct sigaction act = {.sa_handler = pass_on, .sa_flags = SA_RESTART};
        sigaction(passed_on[i], &act, NULL);
    }
    sigprocmask(SIG_SETMASK, &original, NULL); /* what came meanwhile is passed on now */
    int32_t status;
    if (!read_reply('S', &status)) return LOST_STATUS;
    if (WIFSIGNALED(status)) die_of(WTERMSIG(status));
    return WIFEXITED(status) ? WEXITSTATUS(status) : LOST_STATUS;
}
