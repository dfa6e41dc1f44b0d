/* subreaper COMMAND [ARG...]: become a child subreaper, then exec COMMAND.
 *
 * The command server (command_server.py) starts each command through it: the
 * attribute survives exec, so every process the command orphans (a double fork, a
 * setsid daemon) is reparented to the command's own first process instead of to the
 * server, and the server can tell a running command's processes from what an ended
 * command left behind. It does what a preexec_fn calling prctl would, without making
 * the server fork its whole Python process for every command. Any failure stops before
 * COMMAND runs (exit 125).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: subreaper COMMAND [ARG...]\n", stderr);
        return 125;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        perror("subreaper: PR_SET_CHILD_SUBREAPER");
        return 125;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
