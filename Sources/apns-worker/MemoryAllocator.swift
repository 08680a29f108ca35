// Which malloc serves this process. The executable links jemalloc (see Package.swift) so that it replaces
// glibc's; benchmarks print the answer beside their figures, since the allocator moves them.

import CJemalloc

#if canImport(Glibc)
import Glibc
#endif

enum MemoryAllocator {
    /// "jemalloc 5.3.0" when jemalloc serves malloc; otherwise says that glibc's does.
    static var description: String {
        guard jemallocServesMalloc, let version = jemallocVersion else { return "glibc malloc" }
        return "jemalloc " + version
    }

    /// True when the process-wide `malloc` symbol (what the Swift runtime, librdkafka, OpenSSL and nghttp2
    /// all call) is jemalloc's: linking the library is not enough if something earlier in the lookup order
    /// defines malloc.
    static var jemallocServesMalloc: Bool {
        // RTLD_NOLOAD: only a library already loaded (by the link) is looked at, nothing is loaded here.
        guard let library = dlopen("libjemalloc.so.2", RTLD_LAZY | RTLD_NOLOAD) else { return false }
        defer { dlclose(library) }
        guard let global = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc"),
            let jemalloc = dlsym(library, "malloc")
        else { return false }
        return global == jemalloc
    }

    /// Has jemalloc purge freed pages from a background thread: without it, pages freed after a backlog
    /// are purged only when later allocations run jemalloc's decay, so an idle worker kept its peak RSS
    /// (408-520 MB after a 20,000-record peak, #18). With it they are returned within the decay time
    /// (`dirty_decay_ms`, 10 s by default). Does nothing when jemalloc does not serve malloc.
    static func purgeFreedMemoryInTheBackground() {
        guard jemallocServesMalloc else { return }
        var enable = true
        _ = mallctl("background_thread", nil, nil, &enable, MemoryLayout<Bool>.size)
    }

    /// The release, without the git suffix ("5.3.0-0-g54eaed1…" → "5.3.0").
    private static var jemallocVersion: String? {
        var version: UnsafePointer<CChar>?
        var length = MemoryLayout<UnsafePointer<CChar>?>.size
        guard mallctl("version", &version, &length, nil, 0) == 0, let version else { return nil }
        return String(cString: version).split(separator: "-").first.map(String.init)
    }
}
