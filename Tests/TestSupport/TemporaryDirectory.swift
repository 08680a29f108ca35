// A fresh directory per test for the files it writes (keys, certificates, rules, configuration),
// removed when the test lets go of it, or when the process exits for fixtures shared by a whole run
// (a `static let` is never released, and its keys and certificates stayed in /tmp after every run).

import Foundation
import Synchronization

/// A new directory under the system's temporary directory, removed with its contents on release.
package final class TemporaryDirectory: @unchecked Sendable {
    package let path: String

    /// Creates `<tmp>/<prefix>-XXXXXX`.
    package init(prefix: String = "apns-worker-test") {
        let template = NSTemporaryDirectory() + prefix + "-XXXXXX"
        var bytes = Array(template.utf8CString)
        let created = bytes.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(created != nil, "mkdtemp failed for \(template)")
        path = String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// A directory for fixtures shared by the whole test process: removed when the process exits.
    package static func lastingTheProcess(prefix: String) -> TemporaryDirectory {
        let directory = TemporaryDirectory(prefix: prefix)
        let first = removedAtExit.withLock { paths in
            paths.append(directory.path)
            return paths.count == 1
        }
        if first { atexit { TemporaryDirectory.removeDirectoriesLastingTheProcess() } }
        return directory
    }

    private static let removedAtExit = Mutex<[String]>([])

    private static func removeDirectoriesLastingTheProcess() {
        for path in removedAtExit.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
    }

    /// The path of `name` inside the directory.
    package func file(_ name: String) -> String { path + "/" + name }

    @discardableResult
    package func write(_ name: String, _ bytes: some Collection<UInt8>) -> String {
        let written = FileManager.default.createFile(atPath: file(name), contents: Data(bytes))
        precondition(written, "cannot write \(file(name))")
        return file(name)
    }

    @discardableResult
    package func write(_ name: String, _ text: String) -> String { write(name, Array(text.utf8)) }

    package func read(_ name: String) -> [UInt8] { Array(FileManager.default.contents(atPath: file(name)) ?? Data()) }
}
