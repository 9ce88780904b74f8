/* sd-bus from libsystemd (Debian libsystemd-dev): keychaind follows logind's signals with it. */
#include <systemd/sd-bus.h>
