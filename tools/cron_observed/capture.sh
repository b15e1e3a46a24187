#!/bin/sh
# Run Debian's own cron binary (package cron 3.0pl1) through a span of fake time and
# record when each crontab line ran: the observations tests/core/test_debian_cron_observed.py
# holds the `debian` cron dialect to. Needs root (a private mount namespace keeps the
# machine's /etc/cron.d out), libfaketime (package faketime) and network access to the
# Debian archive for `apt-get download cron`. Nothing is installed: the package is
# unpacked into a scratch directory and its cron run there, in the foreground (cron
# wants /var/spool/cron/crontabs to exist: it is made if missing, empty).
#
#   tools/cron_observed/capture.sh "2026-10-25 01:40:00" 110 > fall.txt
#
# $1: where the fake clock starts (wall time in $TZ, default Europe/Berlin); $2: minutes
# of fake time to run (at 20x: $2 * 3 real seconds). Prints one line per run:
# "<tag> <fake UTC time>", the tag naming the crontab line (see LINES below).
set -eu
start=$1
minutes=$2
speed=20
export TZ=${TZ:-Europe/Berlin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get download cron >/dev/null
dpkg-deb -x cron_*.deb root
mkdir -p crond out /var/spool/cron/crontabs
cat > crond/observed <<LINES
SHELL=/bin/sh
* * * * * root echo "every \$(date +\%s.\%N)" >> $work/out/log
0 2 * * * root echo "0200 \$(date +\%s.\%N)" >> $work/out/log
15 2 * * * root echo "0215 \$(date +\%s.\%N)" >> $work/out/log
30 2 * * * root echo "0230 \$(date +\%s.\%N)" >> $work/out/log
0 3 * * * root echo "0300 \$(date +\%s.\%N)" >> $work/out/log
*/20 * * * * root echo "s20 \$(date +\%s.\%N)" >> $work/out/log
30 * * * * root echo "h30 \$(date +\%s.\%N)" >> $work/out/log
LINES
chmod 644 crond/observed
cat > run.sh <<RUN
#!/bin/sh
mount --bind $work/crond /etc/cron.d
date +%s.%N > $work/out/real_start
exec faketime -f "@$start x$speed" $work/root/usr/sbin/cron -f -L 0
RUN
chmod +x run.sh
setsid unshare -m --propagation private ./run.sh >/dev/null 2>&1 &
pid=$!  # a session of its own: cron and its jobs are ended as one group
sleep $((minutes * 60 / speed))
kill -TERM "-$pid"
python3 - "$work/out" "$start" "$speed" <<'PY'
import sys
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo
import os
out, start, speed = sys.argv[1], sys.argv[2], float(sys.argv[3])
zone = ZoneInfo(os.environ["TZ"])
real0 = float(open(f"{out}/real_start").read())
fake0 = datetime.fromisoformat(start).replace(tzinfo=zone).astimezone(timezone.utc)
for line in open(f"{out}/log"):
    tag, real = line.split()
    fake = fake0 + timedelta(seconds=(float(real) - real0) * speed)
    print(tag, fake.strftime("%Y-%m-%dT%H:%M:%SZ"))
PY
