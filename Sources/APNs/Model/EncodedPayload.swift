// A request's payload with its compact bytes and the problems found in it, shared by a request's
// copies (one per device, one per retry) so that each is encoded and checked once.

import JSON
import Synchronization

/// A payload and its compact encoding, immutable once made; shared by the copies of a request.
///
/// Made either from a value (encoded here) or from bytes a renderer wrote directly, whose problems it
/// already knows; then the value is made only if something asks for it (`payload`, `==`), by the
/// renderer's `makeValue`, which must give the value whose compact encoding the bytes are.
final class EncodedPayload: Sendable {
    /// What a payload's problems depend on besides the payload itself.
    struct Check: Sendable, Equatable {
        var pushType: PushType
        var webTopic: Bool
        var broadcast: Bool
    }

    let bytes: [UInt8]
    private let eagerValue: JSONValue?
    private let makeValue: (@Sendable () -> JSONValue)?
    private let madeValue = Mutex<JSONValue?>(nil)
    /// The payload's problems for the last check asked about, a device request's and a broadcast's apart
    /// (one event may send a rule's payload to both): one push type and topic kind per payload is the
    /// rule (a rule's requests all share it), and comparing one value is cheaper than hashing.
    private let checked: Mutex<(device: Answer?, broadcast: Answer?)>

    private typealias Answer = (check: Check, problems: [APNsRequestProblem])

    init(_ value: JSONValue) {
        eagerValue = value
        makeValue = nil
        bytes = value.compactBytes
        checked = Mutex((nil, nil))
    }

    init(
        bytes: [UInt8], knownProblems: [APNsRequestProblem], for check: Check,
        makeValue: @escaping @Sendable () -> JSONValue
    ) {
        self.bytes = bytes
        eagerValue = nil
        self.makeValue = makeValue
        checked = Mutex(check.broadcast ? (nil, (check, knownProblems)) : ((check, knownProblems), nil))
    }

    var value: JSONValue {
        if let eagerValue { return eagerValue }
        return madeValue.withLock { made in
            if let made { return made }
            let value = makeValue!()
            made = value
            return value
        }
    }

    func problems(for check: Check) -> [APNsRequestProblem] {
        let known = checked.withLock { check.broadcast ? $0.broadcast : $0.device }
        if let known, known.check == check { return known.problems }
        let value = self.value
        var problems = APNsPayload.validate(value, pushType: check.pushType, byteCount: bytes.count)
        if check.webTopic { problems += APNsPayload.validateWebPush(value) }
        if check.broadcast { problems += APNsPayload.validateBroadcast(value) }
        checked.withLock { answers in
            if check.broadcast { answers.broadcast = (check, problems) } else { answers.device = (check, problems) }
        }
        return problems
    }
}
