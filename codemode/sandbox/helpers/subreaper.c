/* subreaper COMMAND [ARG...]: become a child subreaper, then exec COMMAND.
 *
 * The command server (command_server.py) starts each command through it: the
 * attribute survives exec, so every process the command orphans (a double fork, a
 * setsid daemon) is reparented to the command's own first process instead of to the
 * server, and the server can tell a running command's processes from what an ended
 * command left behind. It does what a preexec_fn calling prctl would, without making
 * the server fork its whole Python process for every command. Any failure stops before
 * COMMAND runs (exit 125).
 *
 * It runs once per command, so its own start counts: built first with no C library
 * (CODEMODE_NOLIBC, x86-64: three system calls, no libc start-up, a few kilobytes to
 * map), which costs about a fifth of a static glibc program's exec; elsewhere, or
 * where that build fails, with the C library as before (compiled.py tries both).
 */
#if defined(CODEMODE_NOLIBC)
#if !defined(__x86_64__)
#error "the no-libc build is for x86-64; the C library build is used elsewhere"
#endif

#define SYS_write 1
#define SYS_execve 59
#define SYS_exit 60
#define SYS_prctl 157
#define PR_SET_CHILD_SUBREAPER 36

static long sys5(long n, long a, long b, long c, long d, long e) {
    long r;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return r;
}

static void say(const char *s) {
    long n = 0;
    while (s[n]) n++;
    sys5(SYS_write, 2, (long)s, n, 0, 0);
}

static void __attribute__((noreturn)) leave(long code) {
    for (;;) sys5(SYS_exit, code, 0, 0, 0, 0);
}

/* Called from _start with the initial stack: argc, argv..., NULL, envp..., NULL. */
void __attribute__((noreturn, used)) subreaper_main(long *sp) {
    long argc = sp[0];
    char **argv = (char **)(sp + 1);
    char **envp = argv + argc + 1;
    if (argc < 2) {
        say("usage: subreaper COMMAND [ARG...]\n");
        leave(125);
    }
    if (sys5(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        say("subreaper: PR_SET_CHILD_SUBREAPER failed\n");
        leave(125);
    }
    /* COMMAND is a path (the server passes bash's or sh's): no PATH search. */
    long err = -sys5(SYS_execve, (long)argv[1], (long)(argv + 1), (long)envp, 0, 0);
    say(argv[1]);
    say(err == 2    ? ": No such file or directory\n"
        : err == 13 ? ": Permission denied\n"
        : err == 8  ? ": Exec format error\n"
                    : ": cannot be executed\n");
    leave(err == 2 ? 127 : 126);
}

__asm__(".text\n.global _start\n_start:\n"
        "  xor %rbp, %rbp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call subreaper_main\n");

#else
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
#endif
