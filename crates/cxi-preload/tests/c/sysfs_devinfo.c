/* What libcxi's cxil_get_device_list and cxil_query_devinfo read, and the files the CXI
 * provider and cxi_stat read: the class directories, the PCI device behind them, resource0
 * (a PF's 2 GiB BAR), properties that agree with DEV_INFO_GET, the netdev, a writable
 * property. */
#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>

#include "check.h"

static unsigned read_hex(const char *path)
{
	FILE *f = fopen(path, "r");
	CHECK(f, "fopen %s", path);
	unsigned v = 0;
	CHECK(fscanf(f, "%x", &v) == 1, "scan %s", path);
	fclose(f);
	return v;
}

int main(void)
{
	glob_t g;
	CHECK(glob("/sys/class/cxi_user/cxi*", 0, NULL, &g) == 0, "glob");
	CHECK(g.gl_pathc == 1 && strcmp(g.gl_pathv[0], "/sys/class/cxi_user/cxi0") == 0,
	      "one device, spelled as asked: %zu %s", g.gl_pathc, g.gl_pathv[0]);
	globfree(&g);
	/* The real /sys/class/net gets hsn0 added. */
	CHECK(glob("/sys/class/net/*", 0, NULL, &g) == 0, "glob net");
	int hsn = 0;
	for (size_t i = 0; i < g.gl_pathc; i++)
		hsn += strcmp(g.gl_pathv[i], "/sys/class/net/hsn0") == 0;
	CHECK(hsn == 1, "hsn0 listed once among %zu", g.gl_pathc);
	globfree(&g);

	CHECK(access("/sys/class/cxi_user/cxi0", R_OK) == 0, "access");
	CHECK(access("/sys/class/cxi_user/cxi1", R_OK) == -1 && errno == ENOENT, "no cxi1");
	char buf[PATH_MAX];
	CHECK(realpath("/sys/class/cxi_user/cxi0/device/driver", buf), "realpath driver");
	CHECK(strcmp(basename(buf), "cxi_ss1") == 0, "driver %s", buf);
	CHECK(realpath("/sys/class/cxi_user/cxi0/device", buf), "realpath device");
	unsigned dom, bus, dev, fn;
	CHECK(sscanf(basename(buf), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4, "pci %s", buf);
	struct stat st;
	CHECK(stat("/sys/class/cxi_user/cxi0/device/resource0", &st) == 0, "stat resource0");
	CHECK(st.st_size == 2147483648L, "BAR0 of a PF: %lld", (long long)st.st_size);
	CHECK(lstat("/sys/class/cxi/cxi0", &st) == 0 && S_ISLNK(st.st_mode), "class entry link");
	CHECK(stat("/sys/class/cxi/cxi0", &st) == 0 && S_ISDIR(st.st_mode), "class entry dir");
	ssize_t n = readlink("/sys/class/net/hsn0/device", buf, sizeof buf - 1);
	CHECK(n > 0, "readlink");
	buf[n] = 0;
	CHECK(strstr(buf, "0000:3b:00.0") != NULL, "netdev's device %s", buf);
	CHECK(read_hex("/sys/class/cxi/cxi0/device/vendor") == 0x17db, "vendor");

	/* DEV_INFO_GET agrees with the properties. */
	int fd = open_dev();
	uint8_t info[DEVINFO_SIZE];
	memset(info, 0xff, sizeof info);
	struct hdr_cmd c = {.op = OP_DEV_INFO_GET, .resp = (uintptr_t)info};
	CHECK(req(fd, &c, sizeof c) == 0, "DEV_INFO_GET");
	uint32_t nid, granule, platform;
	uint64_t mtu;
	memcpy(&nid, info + DEVINFO_NID, 4);
	memcpy(&granule, info + DEVINFO_PID_GRANULE, 4);
	memcpy(&platform, info + DEVINFO_PLATFORM, 4);
	memcpy(&mtu, info + DEVINFO_LINK_MTU, 8);
	CHECK(read_hex("/sys/class/cxi/cxi0/device/properties/nid") == nid, "nid %u", nid);
	CHECK(granule == 256 && platform == 1 && mtu == 2048 + 64,
	      "granule %u platform %u mtu %llu", granule, platform, (unsigned long long)mtu);
	FILE *f = fopen("/sys/class/net/hsn0/address", "r");
	CHECK(f, "address");
	unsigned b0 = 0;
	CHECK(fscanf(f, "%x:", &b0) == 1 && (b0 & 3) == 2, "locally administered MAC %x", b0);
	fclose(f);

	/* A writable property keeps what was written; a read-only one refuses writes. */
	f = fopen("/sys/class/cxi/cxi0/device/properties/amo_remap_to_pcie_fadd", "w");
	CHECK(f, "open amo_remap for writing");
	fprintf(f, "%d", 5);
	CHECK(fclose(f) == 0, "store amo_remap");
	f = fopen("/sys/class/cxi_user/cxi0/device/properties/amo_remap_to_pcie_fadd", "r");
	int v = 0;
	CHECK(f && fscanf(f, "%d", &v) == 1 && v == 5, "amo_remap read back %d", v);
	fclose(f);
	errno = 0;
	CHECK(fopen("/sys/class/cxi/cxi0/device/properties/pid_bits", "w") == NULL &&
		      errno == EACCES, "pid_bits is read-only");
	close(fd);
	printf("sysfs_devinfo: ok (nid %u)\n", nid);
	return 0;
}
