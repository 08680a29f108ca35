// The one owner of an rd_kafka_t: builds the rd_kafka_conf_t from a property list (turning each
// rejected property into a KafkaError), installs the callbacks, and destroys the handle in deinit.
// The calls each kind of client makes are in RDKafkaClient+Producer and RDKafkaClient+Consumer.

internal import CRdKafka
import Synchronization

/// Owns one `rd_kafka_t`. librdkafka's API is thread-safe, so the handle may be used from any thread.
final class RDKafkaClient: @unchecked Sendable {
    enum Kind { case consumer, producer }

    let handle: OpaquePointer
    let callbacks: RDKafkaCallbacks
    private let destroysHandle = Atomic<Bool>(true)

    /// The handle, for state that must not keep the client alive.
    var borrowed: RDKafkaHandle { RDKafkaHandle(pointer: handle) }

    private init(handle: OpaquePointer, callbacks: RDKafkaCallbacks) {
        self.handle = handle
        self.callbacks = callbacks
    }

    /// Leaves the handle to the process's exit instead of destroying it in deinit: for a handle whose
    /// `rd_kafka_destroy` is known to abort the process (see `ConsumerCore.mustAwaitFirstAssignment`).
    func keepsHandleAtDeinit() {
        destroysHandle.store(false, ordering: .relaxed)
    }

    deinit {
        guard destroysHandle.load(ordering: .relaxed) else {
            // librdkafka's threads go on calling back through the conf's opaque: it must stay valid.
            _ = Unmanaged.passRetained(callbacks)
            return
        }
        // rd_kafka_destroy blocks while it joins librdkafka's threads (and closes a consumer that
        // was not closed), so it runs on a thread of its own; the callbacks stay alive until it is done.
        let handle = RDKafkaHandle(pointer: handle)
        let callbacks = callbacks
        DedicatedThread.start(name: "rdkafka-destroy") {
            rd_kafka_destroy(handle.pointer)
            withExtendedLifetime(callbacks) {}
        }
    }

    /// Creates the client. `properties` are applied in order; every rejected one is named in the error.
    static func make(
        _ kind: Kind, properties: [(String, String)], callbacks: RDKafkaCallbacks
    ) throws(KafkaError) -> RDKafkaClient {
        let conf = try makeConf(
            properties: properties.filter { RDKafkaPropertyScopes.applies($0.0, to: kind) },
            redactor: callbacks.redactor)
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(callbacks).toOpaque())
        installCallbacks(on: conf, for: kind, callbacks: callbacks)
        let (handle, reason) = withErrorBuffer { buffer, size in
            rd_kafka_new(kind == .consumer ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, conf, buffer, size)
        }
        guard let handle else {
            rd_kafka_conf_destroy(conf)  // rd_kafka_new takes the conf only on success
            let what = kind == .consumer ? "consumer" : "producer"
            throw KafkaError(
                code: .invalidConfiguration,
                message: "librdkafka could not create the \(what): \(callbacks.redactor.redact(reason))"
            )
        }
        return RDKafkaClient(handle: handle, callbacks: callbacks)
    }

    /// Builds an `rd_kafka_conf_t`; the caller owns the result.
    static func makeConf(
        properties: [(String, String)], redactor: SecretRedactor
    ) throws(KafkaError) -> OpaquePointer {
        let conf = rd_kafka_conf_new()!
        var rejected: [String] = []
        for (name, value) in properties {
            let (result, reason) = withErrorBuffer { buffer, size in
                rd_kafka_conf_set(conf, name, value, buffer, size)
            }
            guard result != RD_KAFKA_CONF_OK else { continue }
            let shown = KafkaConfiguration.isSecret(name) ? "(value hidden)" : "\"\(value)\""
            rejected.append("property '\(name)' = \(shown): \(redactor.redact(reason))")
        }
        guard rejected.isEmpty else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(
                code: .invalidConfiguration,
                message: "invalid Kafka configuration: " + rejected.joined(separator: "; ")
                    + " (properties are listed in librdkafka's CONFIGURATION.md)"
            )
        }
        return conf
    }

    /// The fatal error librdkafka recorded, as a KafkaError.
    static func recordedFatalError(of rk: OpaquePointer, redactor: SecretRedactor) -> KafkaError {
        let (response, reason) = withErrorBuffer { buffer, size in rd_kafka_fatal_error(rk, buffer, size) }
        return KafkaError(.fatal, redactor.redact(reason), response: response)
    }

    /// The client's fatal error, if it has had one.
    var recordedFatalError: KafkaError? {
        let (response, _) = withErrorBuffer { buffer, size in rd_kafka_fatal_error(handle, buffer, size) }
        guard response != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return Self.recordedFatalError(of: handle, redactor: callbacks.redactor)
    }
}

/// A borrowed `rd_kafka_t`: valid while the ``RDKafkaClient`` that owns it lives. It carries the
/// handle to another thread (librdkafka handles are thread-safe) and to callbacks that get it from C.
struct RDKafkaHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Calls `body` with a zeroed C error buffer and returns its result and the buffer as text.
func withErrorBuffer<Result>(
    _ body: (UnsafeMutablePointer<CChar>, Int) -> Result
) -> (Result, String) {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 512) { buffer in
        buffer.initialize(repeating: 0)
        let result = body(buffer.baseAddress!, buffer.count)
        buffer[buffer.count - 1] = 0
        return (result, String(cString: buffer.baseAddress!))
    }
}
