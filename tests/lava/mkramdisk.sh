#!/bin/sh
# The device's root file system for `make test-lava`: an initramfs (cpio newc, gzip)
# holding Debian's static busybox (sh, awk, sed, sort, tail, tr, wget: what the test
# definition needs) and an /init that mounts the kernel's file systems and gives a
# shell on the serial console. Usage: mkramdisk.sh OUT.cpio.gz (run as root: /dev/console).
set -eu
out=$1
bb=/bin/busybox
file -L "$bb" | grep -q 'statically linked' || { echo "$bb: not static (apt-get install busybox-static)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/sbin" "$stage/usr/bin" "$stage/usr/sbin" "$stage/usr/local/bin" \
	"$stage/proc" "$stage/sys" "$stage/dev" "$stage/tmp" "$stage/root" "$stage/etc" "$stage/run"
cp "$bb" "$stage/bin/busybox"
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
export HOME=/root PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin
export PS1='rtlab-lava# '
echo "rtlab-lava: $(uname -r) ready"
exec setsid cttyhack /bin/sh
INIT
chmod 755 "$stage/init"
(cd "$stage" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -9n > "$out.tmp"
mv "$out.tmp" "$out"
