/* bob's preload for user-mode Linux kernels before 7.0 (see vm/uml.rs,
 * `xstate_preload`). Such a kernel saves and restores its processes' extended
 * register state with PTRACE_GETREGSET/SETREGSET(NT_X86_XSTATE) and a buffer of
 * the size it was built for. The host kernel takes a SETREGSET only with a buffer
 * of the whole XSAVE size of the host's CPU, which is larger where the CPU has
 * AVX-512 or AMX; there the call fails, and the UML kernel kills its first
 * process ("Attempted to kill init! exitcode=0x0000000b"). This wraps both calls
 * in a buffer of the whole size: a read gives the caller its part, a write puts
 * the caller's part over the process's current state. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

#define NT_X86_XSTATE_NOTE 0x202
#define WHOLE (64 * 1024)

typedef long (*ptrace_fn)(int, pid_t, void *, void *);

long ptrace(enum __ptrace_request request, ...)
{
	static ptrace_fn real;
	va_list ap;
	va_start(ap, request);
	pid_t pid = va_arg(ap, pid_t);
	void *addr = va_arg(ap, void *);
	void *data = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace");
	if ((request != PTRACE_SETREGSET && request != PTRACE_GETREGSET) ||
	    (long)addr != NT_X86_XSTATE_NOTE || !data)
		return real(request, pid, addr, data);
	struct iovec *part = data;
	char *buf = malloc(WHOLE);
	if (!buf)
		return real(request, pid, addr, data);
	struct iovec whole = { buf, WHOLE };
	long rc = real(PTRACE_GETREGSET, pid, addr, &whole);
	if (rc < 0 || whole.iov_len <= part->iov_len) {
		free(buf);
		return real(request, pid, addr, data);
	}
	if (request == PTRACE_GETREGSET) {
		memcpy(part->iov_base, buf, part->iov_len);
	} else {
		memcpy(buf, part->iov_base, part->iov_len);
		rc = real(PTRACE_SETREGSET, pid, addr, &whole);
	}
	free(buf);
	return rc;
}
