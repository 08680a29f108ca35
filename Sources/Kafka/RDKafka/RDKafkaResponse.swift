// librdkafka's response codes in Swift terms, and the groups of them the clients act on, so that the
// producer and consumer compare codes without naming a C type.

internal import CRdKafka

/// A librdkafka response code (`rd_kafka_resp_err_t`).
struct RDKafkaResponse: Hashable, Sendable {
    let rawValue: Int32

    @inline(__always)
    init(_ response: rd_kafka_resp_err_t) { rawValue = response.rawValue }

    @inline(__always)
    init(rawValue: Int32) { self.rawValue = rawValue }

    var cValue: rd_kafka_resp_err_t { rd_kafka_resp_err_t(rawValue: rawValue) }

    @inline(__always)
    var isSuccess: Bool { rawValue == RD_KAFKA_RESP_ERR_NO_ERROR.rawValue }

    /// librdkafka's name of the code, for example `_QUEUE_FULL`.
    var name: String { String(cString: rd_kafka_err2name(cValue)) }
    /// librdkafka's description of the code.
    var text: String { String(cString: rd_kafka_err2str(cValue)) }

    static var noError: Self { Self(RD_KAFKA_RESP_ERR_NO_ERROR) }
    static var queueFull: Self { Self(RD_KAFKA_RESP_ERR__QUEUE_FULL) }
    static var messageSizeTooLarge: Self { Self(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) }
    static var allBrokersDown: Self { Self(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) }
    static var fatal: Self { Self(RD_KAFKA_RESP_ERR__FATAL) }

    /// Connection failures: the likely cause when records or a consumer wait for the brokers.
    static let connectionErrors: Set<Int32> = Set(
        [
            RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__RESOLVE, RD_KAFKA_RESP_ERR__SSL,
            RD_KAFKA_RESP_ERR__AUTHENTICATION, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN,
        ].map(\.rawValue))

    /// Commit answers that pass while a group completes a rebalance or finds its coordinator.
    static let retriableCommitErrors: Set<Int32> = Set(
        [
            RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS, RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS,
            RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
            RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__WAIT_COORD,
            RD_KAFKA_RESP_ERR__TIMED_OUT,
        ].map(\.rawValue))

    /// Producer failures that pass with time; see `KafkaError.producerFailureKind`.
    static let transientProducerCodes: Set<Int32> = Set(
        [
            RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, RD_KAFKA_RESP_ERR__TIMED_OUT, RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE,
            RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__RESOLVE,
            RD_KAFKA_RESP_ERR__QUEUE_FULL, RD_KAFKA_RESP_ERR__WAIT_COORD, RD_KAFKA_RESP_ERR__RETRY,
            RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION,
            RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR, RD_KAFKA_RESP_ERR_NOT_CONTROLLER,
            RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS,
            RD_KAFKA_RESP_ERR_NOT_COORDINATOR, RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH,
            RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH, RD_KAFKA_RESP_ERR_PREFERRED_LEADER_NOT_AVAILABLE,
            RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED,
        ].map(\.rawValue))
}

extension KafkaError {
    /// An error for a librdkafka response code: "`context`: librdkafka's text".
    init(_ code: Code, _ context: String, response: RDKafkaResponse) {
        self.init(
            code: code, message: "\(context): \(response.text)",
            librdkafkaCode: response.rawValue, librdkafkaName: response.name
        )
    }

    init(_ code: Code, _ context: String, response: rd_kafka_resp_err_t) {
        self.init(code, context, response: RDKafkaResponse(response))
    }

    /// An error for a librdkafka error object already read: "`context`: `reason`".
    init(_ code: Code, _ context: String, response: RDKafkaResponse, reason: String) {
        self.init(
            code: code, message: "\(context): \(reason)", librdkafkaCode: response.rawValue,
            librdkafkaName: response.name
        )
    }

    /// Takes over and destroys an `rd_kafka_error_t`.
    init(_ code: Code, _ context: String, consuming error: OpaquePointer) {
        let (response, reason) = RDKafkaResponse.consume(error)
        self.init(code, context, response: response, reason: reason)
    }

    /// An error as a delivery report with librdkafka's `response` would carry it, for classification tests.
    static func deliveryFailure(librdkafkaName name: String) -> KafkaError? {
        for raw in Int32(-200)...Int32(200) {
            let response = RDKafkaResponse(rawValue: raw)
            if response.name == name {
                return KafkaError(.delivery, "a test delivery", response: response)
            }
        }
        return nil
    }
}

extension RDKafkaResponse {
    /// Reads the code and text of an `rd_kafka_error_t` and destroys it.
    static func consume(_ error: OpaquePointer) -> (RDKafkaResponse, String) {
        defer { rd_kafka_error_destroy(error) }
        return (RDKafkaResponse(rd_kafka_error_code(error)), String(cString: rd_kafka_error_string(error)))
    }
}
