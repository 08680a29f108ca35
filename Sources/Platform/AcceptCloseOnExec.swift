// Accepting a connection that no child process inherits. `accept` then `fcntl(FD_CLOEXEC)` leaves a window in
// which a child spawned by another thread (tests start openssl, h2o, nghttpd and Kafka tools while servers
// accept) inherits the connection and holds it open for as long as it lives: the peer never sees it close.
// `accept4` sets the flags in the call. Glibc declares it only under _GNU_SOURCE, which Swift's Glibc module
// is not built with, so it is looked up once in the C library that is already loaded.

#if canImport(Glibc)
import Glibc

private typealias Accept4 =
    @convention(c) (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?, Int32)
    -> Int32

/// glibc's `accept4`, which every glibc since 2.10 exports.
private let accept4Function: Accept4? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "accept4").map {
    unsafeBitCast($0, to: Accept4.self)
}

/// Accepts a connection on `listener` as a descriptor no child process inherits (`SOCK_CLOEXEC`), and
/// non-blocking when `nonBlocking` says so; -1 with `errno` set as `accept` sets it.
public func acceptCloseOnExec(_ listener: Int32, nonBlocking: Bool = false) -> Int32 {
    let flags = Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
    guard let accept4Function else {
        // Every glibc since 2.10 has it; without it there is no accept that closes the window.
        errno = ENOSYS
        return -1
    }
    return accept4Function(listener, nil, nil, flags)
}
#endif
