// The calling OS thread: its name (for top -H, /proc/<pid>/task/*/comm and the benches' per-thread CPU) and SIGPIPE.
//
// Not `Thread.current.name = ...`: swift-corelibs-foundation applies that name to the OS thread only
// once `Thread.start()` has stored the new thread's handle, which the parent does after pthread_create
// returns. A thread that names itself first is left with its creator's name (a cooperative-pool
// thread's "com.apple.root.default-qos"): about one loop thread in eight under load, which made event
// loops look like pool threads in `bench pipeline`'s CPU split and in tests.

#if canImport(Glibc)
import Glibc
#endif

public enum CurrentThread {
    /// Sets the calling thread's OS name; Linux keeps the first 15 bytes. Best effort: a name is for
    /// people and tools, so a failure is ignored.
    public static func setName(_ name: String) {
        // Through /proc: Swift's Glibc module does not export the GNU pthread_setname_np.
        let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    /// Makes writes to a socket the peer closed fail with EPIPE instead of killing the process: OpenSSL's
    /// socket BIO writes with write(2), which cannot pass MSG_NOSIGNAL, and a library must not ignore
    /// SIGPIPE for the whole process. The signal is thread-directed, so blocking it on the thread is
    /// enough; it then stays pending there, harmless.
    public static func blockSIGPIPE() {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }
}
