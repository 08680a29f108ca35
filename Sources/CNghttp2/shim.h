#include <nghttp2/nghttp2.h>
/* The event loop that drives nghttp2 sessions uses epoll, eventfd and TCP options, which the Glibc
   module does not export. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/tcp.h>
