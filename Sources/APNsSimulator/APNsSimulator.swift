// An APNs-compatible HTTP/2 server for tests, demos and benchmarks: validates requests like Apple,
// answers with Apple's statuses and reasons, injects faults, and records what it accepted.

import APNs
import Platform
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A local stand-in for APNs.
///
/// ```swift
/// var configuration = SimulatorConfiguration()
/// configuration.authentication = .providerToken(keys: [SimulatorProviderKey(keyID: "ABC123DEFG", publicKeyPEM: pem)])
/// let simulator = try APNsSimulator(configuration)
/// let port = try simulator.start()          // https://127.0.0.1:<port>, trust simulator.caFilePath
/// ...
/// #expect(simulator.accepted.count == 1)
/// simulator.stop()
/// ```
///
/// I/O runs on dedicated threads (one accepting, one per connection, blocking in poll(2)), never on
/// Swift's cooperative pool.
/// - Important: thread-safe. Every method may be called from any thread or task. `stop()` closes
///   the listener and all connections and joins their threads before it returns; it is also called
///   when the simulator is released.
public final class APNsSimulator: Sendable {
    public let configuration: SimulatorConfiguration
    /// The PEM file clients should trust: the generated certificate, or the configured CA file.
    public let caFilePath: String

    private enum Phase {
        case ready
        case running(SimulatorListener)
        case stopped
    }

    private let engine: SimulatorEngine
    private let tls: TLSServerContext
    private let phase = Mutex(Phase.ready)
    private let boundPort = Atomic<Int>(0)
    /// A temporary directory holding the CA file, removed by `stop()`.
    private let temporaryDirectory: String?

    /// Validates the configuration, loads keys, makes or loads the TLS identity and writes the CA file.
    /// Throws `SimulatorError` naming what is wrong.
    public init(_ configuration: SimulatorConfiguration) throws(SimulatorError) {
        try configuration.validate()
        self.configuration = configuration

        let authentication: RequestValidator.Authentication
        var clientCAFile: String?
        switch configuration.authentication {
        case .none:
            authentication = .none
        case .certificate(let caFile):
            authentication = .certificate
            clientCAFile = caFile
        case .providerToken(let keys, let maximumAge, let interval):
            var pems: [String: String] = [:]
            var teams: [String: String] = [:]
            for key in keys {
                guard pems[key.keyID] == nil else {
                    throw SimulatorError(.configuration, "key id \(key.keyID) is configured twice")
                }
                pems[key.keyID] = key.publicKeyPEM
                if let team = key.teamID { teams[key.keyID] = team }
            }
            let verifier: ProviderTokenVerifier
            do {
                verifier = try ProviderTokenVerifier(publicKeysByKeyID: pems)
            } catch {
                throw SimulatorError(.configuration, "cannot load provider token keys: \(error)")
            }
            authentication = .providerToken(
                ProviderTokenAuthenticator(
                    verifier: verifier, teamByKeyID: teams, maximumAge: Int64(maximumAge),
                    minimumUpdateInterval: Int64(interval)))
        }

        let identity: TLSServerContext.Identity
        var trustedFile: String?
        switch configuration.tls {
        case .generated(let hosts):
            identity = .generated(hosts: hosts)
        case .files(let certificate, let privateKey, let caFile):
            identity = .files(certificate: certificate, privateKey: privateKey)
            trustedFile = caFile ?? certificate
        }
        tls = try TLSServerContext(identity: identity, clientCertificateCAFile: clientCAFile)

        if let pem = tls.generatedCertificatePEM {
            if let output = configuration.caOutputPath {
                try Self.write(pem, to: output)
                caFilePath = output
                temporaryDirectory = nil
            } else {
                let directory = try Self.makeTemporaryDirectory()
                caFilePath = directory + "/ca.pem"
                temporaryDirectory = directory
                try Self.write(pem, to: caFilePath)
            }
        } else {
            caFilePath = trustedFile ?? ""
            temporaryDirectory = nil
        }

        let validator = RequestValidator(
            authentication: authentication, devices: configuration.devices,
            allowedBundles: configuration.allowedBundles, startMilliseconds: WallClockTime.milliseconds())
        engine = SimulatorEngine(configuration: configuration, validator: validator)
    }

    deinit { stop() }

    /// Starts listening and serving; returns the port. Throws if it cannot listen, or if called twice.
    @discardableResult
    public func start() throws(SimulatorError) -> Int {
        try phase.withLock { phase throws(SimulatorError) -> Int in
            guard case .ready = phase else {
                throw SimulatorError(.configuration, "start() was already called on this simulator")
            }
            let listener = try SimulatorListener(
                host: configuration.host, port: configuration.port,
                maximumConnections: configuration.maximumConnections, engine: engine, tls: tls)
            try listener.start()
            phase = .running(listener)
            boundPort.store(listener.port, ordering: .releasing)
            return listener.port
        }
    }

    /// The port it listens on; 0 before `start()`.
    public var port: Int { boundPort.load(ordering: .acquiring) }

    /// `https://<host>:<port>`, with brackets around an IPv6 host.
    public var baseURL: String {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "https://\(host):\(port)"
    }

    /// Closes the listener and every connection (each gets GOAWAY Shutdown first), joins every thread
    /// and removes the temporary CA file. Idempotent; blocks until done (milliseconds).
    public func stop() {
        let listener: SimulatorListener? = phase.withLock { phase in
            defer { phase = .stopped }
            if case .running(let listener) = phase { return listener }
            return nil
        }
        listener?.stop()
        if let temporaryDirectory {
            unlink(temporaryDirectory + "/ca.pem")
            rmdir(temporaryDirectory)
        }
    }

    /// What it accepted, oldest first; at most `configuration.acceptedCapacity` records.
    public var accepted: [AcceptedNotification] { engine.accepted }

    /// Forgets the accepted records (counters stay).
    public func clearAccepted() { engine.clearAccepted() }

    /// Counters since start.
    public var stats: SimulatorStats { engine.stats }

    /// The faults in force.
    public var faults: SimulatorFaults { engine.currentFaults().0 }

    /// Replaces the faults at once. Open connections get the new SETTINGS_MAX_CONCURRENT_STREAMS
    /// immediately; `.request(n)` triggers count from this call.
    public func setFaults(_ faults: SimulatorFaults) throws(SimulatorError) {
        try faults.validate()
        engine.faults.setFaults(faults)
        let listener: SimulatorListener? = phase.withLock { phase in
            if case .running(let listener) = phase { return listener }
            return nil
        }
        listener?.wakeConnections()
    }

    /// Waits (polling, without blocking a thread) until at least `count` notifications were
    /// accepted since the last `clearAccepted()`, or `timeout` passes; returns the records.
    public func waitForAccepted(count: Int, timeout: Duration = .seconds(5)) async -> [AcceptedNotification] {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            let records = accepted
            if records.count >= count || clock.now >= deadline { return records }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    private static func makeTemporaryDirectory() throws(SimulatorError) -> String {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array((base + "/apns-simulator-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SimulatorError(
                .system, "cannot create a temporary directory in \(base): \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    private static func write(_ text: String, to path: String) throws(SimulatorError) {
        guard let file = fopen(path, "w") else {
            throw SimulatorError(.tls, "cannot write the CA file \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        let bytes = Array(text.utf8)
        guard fwrite(bytes, 1, bytes.count, file) == bytes.count else {
            throw SimulatorError(.tls, "cannot write the CA file \(path): \(String(cString: strerror(errno)))")
        }
    }
}
