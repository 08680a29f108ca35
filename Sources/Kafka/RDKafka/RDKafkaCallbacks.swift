// The C callbacks every client installs: log lines, errors and statistics become KafkaEvents, a fatal
// error is recorded, delivery reports reach each message's callback, and rebalances reach the consumer.

internal import CRdKafka

/// What the C callbacks of one client call into. The conf's opaque points at this object, which
/// the client keeps alive until after `rd_kafka_destroy`.
final class RDKafkaCallbacks: Sendable {
    /// Runs on the poll thread, inside the poll call, for each rebalance; see ``RDKafkaRebalance``.
    typealias RebalanceCallback = @Sendable (RDKafkaRebalance) -> Void

    let eventHandler: KafkaEventHandler?
    let redactor: SecretRedactor
    /// Called on the poll thread when librdkafka reports a fatal error.
    let onFatal: @Sendable (KafkaError) -> Void
    let onRebalance: RebalanceCallback?
    /// Called on the poll thread for each delivery report (whether it succeeded), before the message's own
    /// delivery object hears of it.
    let onDelivery: (@Sendable (Bool) -> Void)?

    init(
        eventHandler: KafkaEventHandler?, redactor: SecretRedactor,
        onFatal: @escaping @Sendable (KafkaError) -> Void = { _ in },
        onRebalance: RebalanceCallback? = nil, onDelivery: (@Sendable (Bool) -> Void)? = nil
    ) {
        self.eventHandler = eventHandler
        self.redactor = redactor
        self.onFatal = onFatal
        self.onRebalance = onRebalance
        self.onDelivery = onDelivery
    }

    func emit(_ event: KafkaEvent) { eventHandler?(event) }

    static func from(_ opaque: UnsafeMutableRawPointer?) -> RDKafkaCallbacks? {
        guard let opaque else { return nil }
        return Unmanaged<RDKafkaCallbacks>.fromOpaque(opaque).takeUnretainedValue()
    }
}

extension RDKafkaClient {
    static func installCallbacks(on conf: OpaquePointer, for kind: Kind, callbacks: RDKafkaCallbacks) {
        rd_kafka_conf_set_log_cb(conf) { rk, level, facility, line in
            guard let rk, let callbacks = RDKafkaCallbacks.from(rd_kafka_opaque(rk)) else { return }
            let message = KafkaLogMessage(
                level: level, facility: facility.map { String(cString: $0) } ?? "",
                message: callbacks.redactor.redact(line.map { String(cString: $0) } ?? "")
            )
            // Without an offset-commit callback librdkafka reports failed background (auto or
            // scheduled) commits only as this log line; synchronous commits return their error.
            if message.facility == "COMMITFAIL" {
                callbacks.emit(.error(KafkaError(code: .commit, message: message.message)))
            } else {
                callbacks.emit(.log(message))
            }
        }
        rd_kafka_conf_set_error_cb(conf) { rk, code, reason, opaque in
            guard let rk, let callbacks = RDKafkaCallbacks.from(opaque) else { return }
            let response = rd_kafka_resp_err_t(rawValue: code)
            if response == RD_KAFKA_RESP_ERR__FATAL {
                let error = RDKafkaClient.recordedFatalError(of: rk, redactor: callbacks.redactor)
                callbacks.onFatal(error)
                callbacks.emit(.fatal(error))
                return
            }
            let text = callbacks.redactor.redact(reason.map { String(cString: $0) } ?? "")
            callbacks.emit(.error(KafkaError(.client, text, response: response)))
        }
        rd_kafka_conf_set_stats_cb(conf) { _, json, length, opaque in
            guard let json, let callbacks = RDKafkaCallbacks.from(opaque) else { return 0 }
            let text = String(decoding: UnsafeRawBufferPointer(start: json, count: length), as: UTF8.self)
            callbacks.emit(.statistics(text))
            return 0  // 0: librdkafka frees the JSON buffer
        }
        if kind == .producer {
            // Each message's opaque is a retained KafkaDelivery; the report consumes it. The producer hears
            // of every report first (its acknowledgement status), then the message's own object.
            rd_kafka_conf_set_dr_msg_cb(conf) { _, message, opaque in
                guard let message, let messageOpaque = message.pointee._private else { return }
                let delivery = Unmanaged<KafkaDelivery>.fromOpaque(messageOpaque).takeRetainedValue()
                let raw = RDKafkaDelivery(message)
                RDKafkaCallbacks.from(opaque)?.onDelivery?(raw.response.isSuccess)
                delivery.report(raw, of: message)
            }
        }
        if kind == .consumer {
            if callbacks.onRebalance != nil {
                rd_kafka_conf_set_rebalance_cb(conf) { rk, code, partitions, opaque in
                    guard let rk, let partitions, let callbacks = RDKafkaCallbacks.from(opaque) else { return }
                    callbacks.onRebalance?(RDKafkaRebalance(handle: rk, code: code, list: partitions))
                }
            }
        }
    }

}
