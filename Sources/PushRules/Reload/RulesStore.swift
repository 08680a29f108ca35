// The rules in force, swapped atomically when the file changes: a new version replaces the old only
// if it loads without a single problem; otherwise the old rules stay and the problems are reported.

import Foundation
import Synchronization

/// What a reload did.
public enum RulesReloadResult: Sendable {
    /// The file changed and its new rules are now in force.
    case replaced(RuleSet)
    /// The file's bytes are the same as the rules in force: nothing to do.
    case unchanged
    /// The file changed but has problems; the previous rules stay in force.
    case rejected(RulesLoadError)
}

/// Holds the current `RuleSet` of a rules file and reloads it on request.
///
/// - Important: Thread-safe. `current` is a cheap read under a lock; call it per event (or per batch)
///   so a reload takes effect at once. `reload()` reads and compiles the file, which blocks: call it
///   from a dedicated thread (as `RulesFileWatcher` does) or a signal handler's queue, not from
///   Swift's cooperative pool.
public final class RulesStore: Sendable {
    /// The rules file, as given.
    public let path: String

    private struct State {
        var current: RuleSet
        var fingerprint: UInt64?
        /// The last version that failed to load, so it is compiled (and reported by the watcher) once.
        var rejected: (fingerprint: UInt64, error: RulesLoadError)?
    }

    private let state: Mutex<State>
    /// Serialises reloads so that two at once cannot install an older version last.
    private let reloading = Mutex<Void>(())

    /// Loads the file; throws every problem if it is not valid (there is nothing to fall back on).
    /// Reads the file, so it blocks: call it at start-up, off the cooperative pool.
    public init(path: String) throws(RulesLoadError) {
        self.path = path
        let bytes = Self.read(path)
        guard let bytes else {
            throw RulesLoadError(problems: [
                RulesProblem(
                    file: path, position: SourcePosition(line: 1, column: 1), ruleID: nil,
                    message: "the rules file does not exist or cannot be read")
            ])
        }
        let rules = try RuleSet(bytes: bytes, file: path)
        state = Mutex(State(current: rules, fingerprint: Self.fingerprint(bytes), rejected: nil))
    }

    /// Starts from rules already loaded (the file's current bytes are compared on the first reload).
    public init(path: String, initial: RuleSet) {
        self.path = path
        state = Mutex(State(current: initial, fingerprint: nil, rejected: nil))
    }

    /// The rules in force.
    public var current: RuleSet { state.withLock { $0.current } }

    /// Re-reads the file; installs its rules if the bytes changed and they load cleanly. A version
    /// that was rejected before is rejected again with the same problems, without compiling it again.
    public func reload() -> RulesReloadResult {
        reload(reportingRepeatedRejections: true)
    }

    /// As `reload()`, but a version already rejected counts as unchanged (what a watcher wants:
    /// each bad version reported once).
    public func reloadIfChanged() -> RulesReloadResult {
        reload(reportingRepeatedRejections: false)
    }

    private func reload(reportingRepeatedRejections: Bool) -> RulesReloadResult {
        reloading.withLock { _ in
            guard let bytes = Self.read(path) else {
                return .rejected(
                    RulesLoadError(problems: [
                        RulesProblem(
                            file: path, position: SourcePosition(line: 1, column: 1), ruleID: nil,
                            message: "the rules file does not exist or cannot be read; keeping the rules in force")
                    ]))
            }
            let fingerprint = Self.fingerprint(bytes)
            let known = state.withLock { ($0.fingerprint, $0.rejected) }
            if known.0 == fingerprint { return .unchanged }
            if let rejected = known.1, rejected.fingerprint == fingerprint {
                return reportingRepeatedRejections ? .rejected(rejected.error) : .unchanged
            }
            let rules: RuleSet
            do { rules = try RuleSet(bytes: bytes, file: path) } catch let error as RulesLoadError {
                state.withLock { $0.rejected = (fingerprint, error) }
                return .rejected(error)
            } catch {
                return .rejected(RulesLoadError(problems: []))
            }
            state.withLock { $0 = State(current: rules, fingerprint: fingerprint, rejected: nil) }
            return .replaced(rules)
        }
    }

    /// Installs rules built elsewhere (tests, an admin endpoint).
    public func replace(with rules: RuleSet) {
        reloading.withLock { _ in state.withLock { $0 = State(current: rules, fingerprint: nil, rejected: nil) } }
    }

    private static func read(_ path: String) -> [UInt8]? {
        guard let data = FileManager.default.contents(atPath: path), data.count <= RuleSet.maximumFileSize else {
            return nil
        }
        return Array(data)
    }

    /// FNV-1a over the bytes, with the length mixed in.
    static func fingerprint(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash ^ UInt64(bytes.count)
    }
}
