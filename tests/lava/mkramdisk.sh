#!/bin/sh
# The device's root file system for `make test-lava`: an initramfs (cpio newc, gzip)
# holding Debian's static busybox (sh, awk, sed, sort, tail, tr, wget: what the test
# definition needs), the e1000 driver of kernel RELEASE, and an /init that mounts the
# kernel's file systems, configures QEMU's user network (the guest is 10.0.2.15, the
# host 10.0.2.2) and gives a shell on the serial console.
# Usage: mkramdisk.sh OUT.cpio.gz RELEASE (as root: /dev/console).
set -eu
out=$1
release=$2
e1000=/lib/modules/$release/kernel/drivers/net/ethernet/intel/e1000/e1000.ko
[ -f "$e1000" ] || { echo "$e1000: missing (apt-get install linux-image-$release)" >&2; exit 1; }
bb=/bin/busybox
file -L "$bb" | grep -q 'statically linked' || { echo "$bb: not static (apt-get install busybox-static)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/sbin" "$stage/usr/bin" "$stage/usr/sbin" "$stage/usr/local/bin" \
	"$stage/proc" "$stage/sys" "$stage/dev" "$stage/tmp" "$stage/root" "$stage/etc" "$stage/run"
cp "$bb" "$stage/bin/busybox"
mkdir -p "$stage/lib/modules"
cp "$e1000" "$stage/lib/modules/e1000.ko"
for applet in $("$bb" --list-full); do
	[ -e "$stage/$applet" ] || ln -s /bin/busybox "$stage/$applet"
done
mknod -m 600 "$stage/dev/console" c 5 1
echo 'root:x:0:0:root:/root:/bin/sh' > "$stage/etc/passwd"
echo 'root:x:0:' > "$stage/etc/group"
cat > "$stage/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
hostname rtlab-lava
if insmod /lib/modules/e1000.ko && ip link set eth0 up; then
	ip addr add 10.0.2.15/24 dev eth0
	ip route add default via 10.0.2.2
fi
export HOME=/root PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin
export PS1='rtlab-lava# '
echo "rtlab-lava: $(uname -r) ready"
exec setsid cttyhack /bin/sh
INIT
chmod 755 "$stage/init"
(cd "$stage" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -9n > "$out.tmp"
mv "$out.tmp" "$out"
