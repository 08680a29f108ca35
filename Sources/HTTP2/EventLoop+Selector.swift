// The epoll registrations of a loop's connections: ids that map readiness events back to connections,
// and each socket's read/write interest.

import CNghttp2
import Glibc
import Platform

extension EventLoop {
    /// Registers a connection; returns its epoll registration id.
    func register(_ connection: HTTP2Connection) -> UInt64 {
        let id = nextRegistration
        nextRegistration += 1
        connections[id] = connection
        if nextTick == 0 { nextTick = MonotonicClock.now() + Self.tickInterval }
        return id
    }

    func unregister(_ registration: UInt64) {
        connections[registration] = nil
    }

    /// Adds or changes the epoll interest of `fd`.
    func watch(fd: Int32, registration: UInt64, readable: Bool, writable: Bool, add: Bool) {
        var event = epoll_event()
        event.events =
            (readable ? EPOLLIN.rawValue : 0) | (writable ? EPOLLOUT.rawValue : 0)
            | EPOLLRDHUP.rawValue
        event.data.u64 = registration
        epoll_ctl(epollFD, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event)
    }

    func unwatch(fd: Int32) {
        var event = epoll_event()
        epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &event)
    }
}
