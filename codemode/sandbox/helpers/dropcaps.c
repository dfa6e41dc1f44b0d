/* dropcaps COMMAND [ARG...]: empty the capability bounding, ambient, inheritable,
 * permitted and effective sets, then exec COMMAND.
 *
 * Run by bubblewrap as root, inside the sandbox, holding only CAP_SETPCAP (which
 * dropping the bounding set needs). It does what `setpriv --bounding-set=-all
 * --inh-caps=-all --ambient-caps=-all` does, statically linked and with nothing else,
 * because setpriv's exec and dynamic loading cost about a millisecond of every
 * confined call. Any failure stops before COMMAND runs (exit 125).
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: dropcaps COMMAND [ARG...]\n", stderr);
        return 125;
    }
    /* EINVAL: past the last capability this kernel knows */
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
            perror("dropcaps: PR_CAPBSET_DROP");
            return 125;
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
        perror("dropcaps: PR_CAP_AMBIENT_CLEAR_ALL");
        return 125;
    }
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0) {
        perror("dropcaps: capset");
        return 125;
    }
    if (prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 0) {
        fputs("dropcaps: the bounding set is not empty\n", stderr);
        return 125;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "dropcaps: %s: %s\n", argv[1], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
