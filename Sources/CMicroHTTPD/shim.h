#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdarg.h>
#include <microhttpd.h>

// Swift does not import C variadic functions, and MHD_get_daemon_info has no va_list twin:
// this wraps the one query the worker needs (the port actually bound when asked for port 0).
static inline uint16_t apns_worker_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}
