// The librdkafka version read at run time, which decides which version-specific workarounds apply.

import Kafka
import Testing

@Suite("librdkafka version")
struct RDKafkaVersionTests {
    @Test("the loaded version is the library's own, and the 4312 workaround applies only before 2.3.0")
    func loadedVersionDecidesWorkarounds() {
        let loaded = RDKafkaVersion.loaded
        // rd_kafka_version_str() may carry a suffix ("2.16.1-RC1"); the numbers come first.
        #expect(RDKafkaVersion.loadedText.hasPrefix(loaded.description), "\(RDKafkaVersion.loadedText)")
        #expect(RDKafkaVersion(major: 2, minor: 0, revision: 2).abortsDestroyingBeforeFirstAssignment)
        #expect(!RDKafkaVersion(major: 2, minor: 3, revision: 0).abortsDestroyingBeforeFirstAssignment)
        #expect(!RDKafkaVersion(major: 2, minor: 16, revision: 1).abortsDestroyingBeforeFirstAssignment)
        #expect(!RDKafkaVersion(major: 2, minor: 0, revision: 2).hasFetchQueueBackoff)
        #expect(!RDKafkaVersion(major: 2, minor: 1, revision: 1).hasFetchQueueBackoff)
        #expect(RDKafkaVersion(major: 2, minor: 2, revision: 0).hasFetchQueueBackoff)
        #expect(RDKafkaVersion(major: 2, minor: 16, revision: 1).hasFetchQueueBackoff)
        print("librdkafka \(RDKafkaVersion.loadedText) loaded")
    }
}
