/*
 * xfs: sync(2) returns without a disk cache flush when it has nothing to log.
 *
 * Usage: repro setup FILE            create FILE: 16 KiB of 0x11, and FILE.other:
 *                                    4 KiB of 0x11; fsync both, sync
 *        repro run FILE [--pin-clock]
 *                                    O_DIRECT write 4 KiB of 0x22 at 8192, fsync,
 *                                    buffered write 4 KiB of 0x33 at 7680, sync
 *        repro run-other FILE        buffered write 4 KiB of 0x33 at 7680 of FILE,
 *                                    write 4 KiB of 0x44 to FILE.other, fsync
 *                                    FILE.other, sync: no clock involved
 *        repro check FILE            exit 0 if 7680..11775 reads 0x33, else 1
 *
 * `run` starts right after a tick of the coarse clock (the clock file timestamps come
 * from), so that the overwrite has the best chance to land in the tick of the direct
 * write: its mtime/ctime then do not change, the inode is not logged, and xfs's sync
 * has nothing to force to the log, so it sends no cache flush after writing the
 * overwrite's blocks. It prints whether the coarse clock read the same before the
 * direct write and after the overwrite ("same-tick yes"), which makes the failure
 * certain, or not ("same-tick no"), which avoids it.
 *
 * --pin-clock sets CLOCK_REALTIME back to one instant right after a tick before each of
 * the two writes, so both see the same coarse time however slow the fsync between them
 * is (a VM under emulation). It changes the machine's clock: use it in a throw-away VM only.
 *
 * `run-other` needs no luck: the overwrite changes FILE's timestamps (a second or more
 * after setup), but the fsync of the other file forces the log with that change in it,
 * so the sync again finds nothing to log and sends no flush after writing FILE's data.
 *
 * With REPRO_TRACE_MARKER naming a tracefs trace_marker file, `run` writes "repro: sync
 * begins" and "repro: sync returned" to it, so a block trace shows what the sync sent (repro-trace.sh).
 *
 * Build: cc -O2 -o repro repro.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BS 4096

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void fill_write(int fd, int byte, off_t off, size_t len, int direct)
{
	void *buf;

	if (posix_memalign(&buf, BS, len))
		die("posix_memalign");
	memset(buf, byte, len);
	if (pwrite(fd, buf, len, off) != (ssize_t)len)
		die(direct ? "pwrite O_DIRECT" : "pwrite");
	free(buf);
}

static long long coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A line in the kernel's trace buffer named by $REPRO_TRACE_MARKER (repro-trace.sh). */
static void mark(const char *text)
{
	const char *marker = getenv("REPRO_TRACE_MARKER");
	int fd = marker ? open(marker, O_WRONLY) : -1;

	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) < 0)
		perror("trace_marker");
	close(fd);
}

static const char *other(const char *path)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "%s.other", path);
	return buf;
}

static void next_tick(void)
{
	long long t0 = coarse_ns();

	while (coarse_ns() == t0)
		;
}

static void set_clock(const struct timespec *ts)
{
	if (clock_settime(CLOCK_REALTIME, ts))
		die("clock_settime");
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s setup|run|run-other|check FILE [--pin-clock]\n", argv[0]);
		return 2;
	}
	const char *cmd = argv[1], *path = argv[2];
	int pin = argc > 3 && !strcmp(argv[3], "--pin-clock");

	if (!strcmp(cmd, "setup")) {
		int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
		if (fd < 0)
			die("open");
		fill_write(fd, 0x11, 0, 4 * BS, 0);
		if (fsync(fd))
			die("fsync");
		close(fd);
		fd = open(other(path), O_CREAT | O_TRUNC | O_WRONLY, 0644);
		if (fd < 0)
			die("open other");
		fill_write(fd, 0x11, 0, BS, 0);
		if (fsync(fd))
			die("fsync other");
		close(fd);
		sync();
		return 0;
	}
	if (!strcmp(cmd, "check")) {
		unsigned char buf[BS];
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			die("open");
		if (pread(fd, buf, BS, 7680) != BS)
			die("pread");
		int bad = 0;
		for (int i = 0; i < BS; i++)
			bad += buf[i] != 0x33;
		printf("%s: 7680..11775: %d of 4096 bytes are not the overwrite's 0x33"
		       " (first bytes 0x%02x at 7680, 0x%02x at 8192)\n",
		       path, bad, buf[0], buf[512]);
		return bad ? 1 : 0;
	}
	if (!strcmp(cmd, "run-other")) {
		int fd = open(path, O_WRONLY);
		int ofd = open(other(path), O_WRONLY);
		if (fd < 0 || ofd < 0)
			die("open");
		fill_write(fd, 0x33, 7680, BS, 0);
		fill_write(ofd, 0x44, 0, BS, 0);
		if (fsync(ofd))
			die("fsync other");
		mark("repro: sync begins");
		sync();
		mark("repro: sync returned");
		printf("overwrite, then fsync of another file\n");
		return 0;
	}
	if (strcmp(cmd, "run"))
		return 2;

	int dfd = open(path, O_WRONLY | O_DIRECT);
	int fd = open(path, O_WRONLY);
	if (dfd < 0 || fd < 0)
		die("open");
	struct timespec pinned;
	/* Start right after a tick: a whole tick for the three calls. */
	next_tick();
	if (pin) {
		clock_gettime(CLOCK_REALTIME, &pinned);
		set_clock(&pinned);
	}
	long long before = coarse_ns();
	fill_write(dfd, 0x22, 2 * BS, BS, 1);
	if (fsync(dfd))
		die("fsync");
	if (pin) {
		next_tick();
		set_clock(&pinned);
	}
	fill_write(fd, 0x33, 7680, BS, 0);
	long long after = coarse_ns();
	mark("repro: sync begins");
	sync();
	mark("repro: sync returned");
	printf("same-tick %s (coarse clock moved %lld ns from the direct write to the overwrite)\n",
	       before == after ? "yes" : "no", after - before);
	return 0;
}
