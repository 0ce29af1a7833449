/*
 * Preloaded into the client side of bench/real-cxi.sh's server/client pairs: a connect() to
 * a TCP address that nobody listens on yet is retried for up to 60 s instead of failing with
 * ECONNREFUSED.
 *
 * On two real nodes the client is started once the server listens. Under `nicemu run` both
 * sides start together and each process's emulated Cassini joins the job's fabric when it
 * first opens /dev/cxi0, which the server does before it listens (libcxi's utilities open the
 * device, then set up their control socket), so the client's first connect() can come before
 * the server's listen(). Nothing else of the program's behaviour changes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	static int (*next)(int, const struct sockaddr *, socklen_t);
	if (!next)
		next = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	int rc = next(fd, addr, len);
	if (rc == 0 || errno != ECONNREFUSED || !addr ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return rc;
	/* Only blocking sockets: a refused non-blocking connect is the caller's business. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_NONBLOCK))
		return rc;
	for (int i = 0; i < 600; i++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		/* A socket whose connect failed may be reused on Linux for another connect. */
		rc = next(fd, addr, len);
		if (rc == 0 || errno != ECONNREFUSED)
			return rc;
	}
	return rc;
}
