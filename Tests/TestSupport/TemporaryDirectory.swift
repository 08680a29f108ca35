// A fresh directory per test for the files it writes (keys, certificates, rules, configuration),
// removed when the test lets go of it.

import Foundation

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
