// The request model's validation, per request, without repeating the work that depends only on the
// headers: those checks (topic syntax and suffix, priority for the push type, expiration) give the
// same answer for every event of a rule, so their result is remembered per header combination,
// and only the payload is checked every time, with APNsPayload.validate, the model's own check.
import APNs
import Synchronization

/// Validates requests exactly as `APNsRequest.validate()` does, faster on repeated headers.
///
/// - Important: Thread-safe. The memo is bounded (`capacity` entries, then cleared), so memory
///   stays bounded whatever topics events carry.
final class RequestValidation: Sendable {
    struct HeaderKey: Hashable {
        let topic: String
        let pushType: PushType
        let priority: APNsPriority
        /// nil for none, 0 for immediately, 1 for any time in the range APNs accepts (the checks give
        /// the same answer for all of them), the time itself otherwise.
        let expiration: Int64?
        let hasCollapseID: Bool
    }

    static let capacity = 1024
    /// Expirations from here on are milliseconds by mistake (`APNsExpiration`'s threshold, the year 5138).
    static let secondsLimit: Int64 = 100_000_000_000
    private struct Memo {
        /// The last headers seen: a rule's requests nearly always share them, and comparing is
        /// cheaper than hashing.
        var last: (key: HeaderKey, problems: [APNsRequestProblem])?
        var all: [HeaderKey: [APNsRequestProblem]] = [:]

        func lookUp(_ key: HeaderKey) -> [APNsRequestProblem]? {
            if let last, last.key == key { return last.problems }
            return all[key]
        }
    }

    /// One per rule, so the last-seen entry stays warm.
    private let memo = Mutex<Memo>(Memo())

    /// Every problem `request.validate()` would report.
    func problems(_ request: APNsRequest) -> [APNsRequestProblem] {
        let key = HeaderKey(
            topic: request.topic, pushType: request.pushType, priority: request.priority,
            expiration: request.expiration.unixSeconds.map { $0 > 0 && $0 < Self.secondsLimit ? 1 : $0 },
            hasCollapseID: request.collapseID != nil)
        let headerProblems: [APNsRequestProblem]
        if let known = memo.withLock({ $0.lookUp(key) }) {
            headerProblems = known
        } else {
            // The model's own validation of the headers, on a copy with an empty payload.
            var headersOnly = request
            headersOnly.payload = .object(JSONObject())
            headerProblems = headersOnly.validate().filter { !$0.field.hasPrefix("payload") }
            memo.withLock { memo in
                if memo.all.count >= Self.capacity { memo.all.removeAll(keepingCapacity: true) }
                memo.all[key] = headerProblems
                memo.last = (key, headerProblems)
            }
        }
        return headerProblems + APNsPayload.validate(
            request.payload, pushType: request.pushType, byteCount: PayloadSize.compactByteCount(of: request.payload))
    }
}
