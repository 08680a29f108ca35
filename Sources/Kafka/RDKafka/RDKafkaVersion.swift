// The librdkafka loaded at run time (not the headers compiled against): the process may run with
// another build of the same SONAME, and workarounds for one version's bugs must apply only to it.

internal import CRdKafka

/// The version of the librdkafka this process runs with, from `rd_kafka_version()`.
package struct RDKafkaVersion: Comparable, Sendable, CustomStringConvertible {
    /// librdkafka's encoding, 0xMMmmrrpp (major, minor, revision, pre-release; 0xff for a final release).
    package let encoded: Int32

    package static let loaded = RDKafkaVersion(encoded: rd_kafka_version())

    package init(encoded: Int32) { self.encoded = encoded }
    package init(major: Int32, minor: Int32, revision: Int32) {
        encoded = (major << 24) | (minor << 16) | (revision << 8) | 0xff
    }

    package var major: Int32 { (encoded >> 24) & 0xff }
    package var minor: Int32 { (encoded >> 16) & 0xff }
    package var revision: Int32 { (encoded >> 8) & 0xff }

    /// What `rd_kafka_version_str()` says, e.g. "2.0.2".
    package static var loadedText: String { String(cString: rd_kafka_version_str()) }

    package var description: String { "\(major).\(minor).\(revision)" }

    package static func < (lhs: RDKafkaVersion, rhs: RDKafkaVersion) -> Bool { lhs.encoded < rhs.encoded }

    /// Destroying a cooperative-sticky consumer that joined but never got its first assignment aborts
    /// the process (librdkafka issue 4312); fixed in 2.3.0.
    package var abortsDestroyingBeforeFirstAssignment: Bool {
        self < RDKafkaVersion(major: 2, minor: 3, revision: 0)
    }

    /// Whether `fetch.queue.backoff.ms` exists (2.2.0): before it, a partition whose prefetch queue was
    /// full at a fetch decision waited for the broker thread's next wake-up, up to a second.
    package var hasFetchQueueBackoff: Bool {
        self >= RDKafkaVersion(major: 2, minor: 2, revision: 0)
    }
}
