// Reloading: a valid new file replaces the rules atomically; an invalid one leaves them in force and
// says why; the watcher notices changes by content.

import APNs
import Foundation
import JSON
import Synchronization
import TestSupport
import Testing

@testable import PushRules

@Suite struct RulesStoreTests {
    static func rules(_ alert: String) -> String {
        "version: 1\nrules:\n  - id: r\n    match: {}\n    alert: \(alert)\n"
    }

    /// Removed with the files in it when the test ends.
    let directory = TemporaryDirectory(prefix: "rules-store")

    /// `rules.yaml` in this test's directory, holding `text`.
    func temporaryFile(_ text: String) throws -> String {
        directory.write("rules.yaml", text)
    }

    static func alert(_ store: RulesStore) throws -> JSONValue? {
        let decisions = store.current.evaluate(try JSONValue(parsing: Golden.event()), now: Golden.now)
        return decisions.decisions.first?.json()["body"]?["aps"]?["alert"]
    }

    @Test func aValidNewFileReplacesTheRules() throws {
        let path = try temporaryFile(Self.rules("one"))
        let store = try RulesStore(path: path)
        #expect(try Self.alert(store) == "one")
        guard case .unchanged = store.reload() else {
            Issue.record("expected unchanged")
            return
        }
        try Data(Self.rules("two").utf8).write(to: URL(fileURLWithPath: path))
        guard case .replaced(let rules) = store.reload() else {
            Issue.record("expected replaced")
            return
        }
        #expect(rules === store.current)
        #expect(try Self.alert(store) == "two")
    }

    @Test func anInvalidNewFileKeepsTheOldRulesAndSaysWhy() throws {
        let path = try temporaryFile(Self.rules("one"))
        let store = try RulesStore(path: path)
        let before = store.current
        try Data("version: 1\nrules:\n  - id: r\n    match: {}\n    alert: \"{{ nope }}\"\n".utf8)
            .write(to: URL(fileURLWithPath: path))
        guard case .rejected(let error) = store.reload() else {
            Issue.record("expected rejected")
            return
        }
        #expect(
            error.problems.map(\.description) == [
                "\(path):5:16: rule 'r': alert: template error: unknown variable 'nope'; templates can read event, "
                    + "device and locale"
            ])
        #expect(store.current === before)
        #expect(try Self.alert(store) == "one")
        // Asked again (as on SIGHUP), the same bad version is reported again.
        guard case .rejected(let again) = store.reload() else {
            Issue.record("expected rejected")
            return
        }
        #expect(again.problems == error.problems)
        guard case .unchanged = store.reloadIfChanged() else {
            Issue.record("expected unchanged")
            return
        }
        try FileManager.default.removeItem(atPath: path)
        guard case .rejected(let missing) = store.reload() else {
            Issue.record("expected rejected")
            return
        }
        #expect(missing.problems.first?.message.contains("keeping the rules in force") == true)
        #expect(store.current === before)
    }

    @Test func anInvalidFileCannotStartAStore() throws {
        let path = try temporaryFile("version: 1\n")
        #expect(throws: RulesLoadError.self) { try RulesStore(path: path) }
    }

    @Test func readersAlwaysSeeAWholeRuleSetWhileReloading() async throws {
        let path = try temporaryFile(Self.rules("v0"))
        let store = try RulesStore(path: path)
        let event = try JSONValue(parsing: Golden.event())
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for version in 1...30 {
                    try? Data(Self.rules("v\(version)").utf8).write(to: URL(fileURLWithPath: path))
                    _ = store.reload()
                }
            }
            for _ in 0..<2 {
                group.addTask {
                    for _ in 0..<500 {
                        let decision = store.current.evaluate(event, now: Golden.now).decisions.first
                        let alert = decision?.json()["body"]?["aps"]?["alert"]
                        #expect(alert?.stringValue?.hasPrefix("v") == true)
                    }
                }
            }
        }
        #expect(try Self.alert(store) == "v30")
    }

    @Test func theWatcherReloadsWhenTheContentChanges() async throws {
        let path = try temporaryFile(Self.rules("one"))
        let store = try RulesStore(path: path)
        let results = Mutex<[String]>([])
        let watcher = RulesFileWatcher(store: store, interval: .milliseconds(100)) { result in
            results.withLock { results in
                switch result {
                case .replaced: results.append("replaced")
                case .rejected: results.append("rejected")
                case .unchanged: results.append("unchanged")
                }
            }
        }
        watcher.start()
        defer { watcher.stop() }
        // Same size, same second: only the content hash can tell. Written atomically (as a Kubernetes
        // ConfigMap swap is): a write in place could be read half done, a version of its own to reject.
        try Data(Self.rules("two").utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        #expect(await eventually(timeout: .seconds(10)) { results.withLock { $0 } == ["replaced"] })
        #expect(try Self.alert(store) == "two")
        try Data(Self.rules("\"{{ x }}\"").utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        #expect(await eventually(timeout: .seconds(10)) { results.withLock { $0 } == ["replaced", "rejected"] })
        #expect(try Self.alert(store) == "two")
        // A rejected version is reported once, not on every tick: three more ticks, run here rather than
        // waited for, report nothing.
        for _ in 0..<3 { watcher.check() }
        #expect(results.withLock { $0 } == ["replaced", "rejected"])
    }
}
