// `apns-worker simulator`: runs the APNs simulator until SIGINT/SIGTERM, printing where it listens and
// the CA file to trust, and its counters as JSON when it stops.

import APNs
import APNsSimulator
import Foundation
import Platform

struct SimulatorCommand: Command {
    static let name = "simulator"
    static let summary = "Run a local APNs-compatible HTTP/2 server with fault injection."
    static let discussion = """
        Validates requests like APNs (method, path, headers, payload, provider tokens or client
        certificates) and answers with Apple's statuses and reasons. Prints
            listening on https://127.0.0.1:PORT
            ca-file: PATH
        then serves until SIGINT or SIGTERM, and prints `stats: {...}` (JSON) on the way out.
        Options override the --config file. Without --key-id or --client-ca-file any request is
        accepted without authentication.

        --latency-ms takes FIXED, MIN-MAX (uniform), exp:MEAN, or FIXED+exp:MEAN, in milliseconds.

        Example:
          apns-worker simulator --port 2197 --key-id ABC123DEFG --public-key-file key.pub \\
              --unregistered-rate 0.05 --fail-rate 0.01 --fail-status 503 --retry-after 2

        Configuration file (JSON; every key optional; the // notes are not part of the format):
        \(SimulatorConfiguration.fileFormat)
        """
    static let options: [OptionSpec] = [
        .value("--config", "FILE", "JSON configuration file (format below)."),
        .value("--host", "ADDRESS", "Address to listen on. Default: 127.0.0.1."),
        .value("--port", "PORT", "Port to listen on; 0 picks a free one. Default: 0."),
        .value("--environment", "ENV", "sandbox (answers carry apns-unique-id) or production. Default: sandbox."),
        .repeated("--key-id", "KEY_ID", "Trust provider tokens of this Key ID (pair with --public-key-file)."),
        .repeated("--public-key-file", "FILE", "PEM public key for the --key-id at the same position."),
        .value("--client-ca-file", "FILE", "Require client certificates signed by this CA (certificate auth)."),
        .value("--unregistered-rate", "R", "Share of tokens answered 410 Unregistered (stable per token)."),
        .value("--bad-token-rate", "R", "Share of tokens answered 400 BadDeviceToken (stable per token)."),
        .value("--fail-rate", "R", "Share of requests answered with --fail-status."),
        .value("--fail-status", "STATUS", "429, 500 or 503. Default: 503."),
        .value("--retry-after", "SECONDS", "Retry-After header on injected failures."),
        .value("--stall-rate", "R", "Share of requests never answered."),
        .value("--drop-rate", "R", "Share of requests whose connection is closed at once."),
        .value("--go-away-after", "N", "Send GOAWAY after N streams on each connection."),
        .value("--max-concurrent-streams", "N", "SETTINGS_MAX_CONCURRENT_STREAMS. Default: 1000."),
        .value("--latency-ms", "SPEC", "Answer latency: FIXED, MIN-MAX, exp:MEAN or FIXED+exp:MEAN."),
        .value(
            "--handshake-ms", "MS",
            "Hold each new connection's TLS handshake this long (a far server's TCP and TLS round trips). "
                + "Default: 0."),
        .value(
            "--device-limit", "N/MS",
            "APNs' per-device limit: after N requests to one device token within MS milliseconds, 429 "
                + "TooManyRequests for the rest of the window."),
        .value("--cert-file", "FILE", "Server certificate (PEM) instead of a generated one."),
        .value("--key-file", "FILE", "Private key (PEM) for --cert-file."),
        .value("--ca-out", "FILE", "Write the CA certificate to trust here (default: a temporary file)."),
        .value("--seed", "N", "Seed for fault rates and latency jitter. Default: 1."),
    ]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let configuration = try makeConfiguration(arguments)
        // Handle SIGINT/SIGTERM before printing the address: whoever reads it may signal at once.
        let termination = SignalWatcher(signals: [SIGINT, SIGTERM])
        let simulator: APNsSimulator
        do {
            simulator = try APNsSimulator(configuration)
            try simulator.start()
        } catch {
            standardError("apns-worker simulator: \(error.message)")
            return 1
        }
        print("listening on \(simulator.baseURL)")
        print("ca-file: \(simulator.caFilePath)")
        print("authentication: \(describe(configuration.authentication))")
        fflush(nil)  // nil flushes every stream; `stdout` is not concurrency-safe in Swift 6

        _ = await termination.waitForFirst()
        termination.cancel()
        simulator.stop()
        print("stats: \(simulator.stats.json.compactString)")
        fflush(nil)  // nil flushes every stream; `stdout` is not concurrency-safe in Swift 6
        return 0
    }

    /// The configuration file (if any) with the options applied over it.
    static func makeConfiguration(_ arguments: ParsedArguments) throws -> SimulatorConfiguration {
        var configuration = SimulatorConfiguration()
        if let file = arguments.value("--config") {
            do {
                configuration = try SimulatorConfiguration(contentsOfFile: file)
            } catch {
                throw UsageError(message: error.message)
            }
        }
        if let host = arguments.value("--host") {
            configuration.host = host
            if case .generated(let hosts) = configuration.tls, !hosts.contains(host) {
                configuration.tls = .generated(hosts: hosts + [host])
            }
        }
        if let port = try arguments.integer("--port", range: 0...65535) { configuration.port = port }
        if let environment = arguments.value("--environment") {
            guard let parsed = try? APNsEnvironment(parsing: environment) else {
                throw UsageError(message: "--environment must be sandbox or production, got '\(environment)'")
            }
            configuration.environment = parsed
        }
        let keyIDs = arguments.all("--key-id")
        let keyFiles = arguments.all("--public-key-file")
        guard keyIDs.count == keyFiles.count else {
            throw UsageError(
                message: "give one --public-key-file per --key-id (got \(keyIDs.count) key ids and "
                    + "\(keyFiles.count) files)")
        }
        if !keyIDs.isEmpty {
            var keys: [SimulatorProviderKey] = []
            for (keyID, file) in zip(keyIDs, keyFiles) {
                guard let pem = try? String(contentsOfFile: file, encoding: .utf8) else {
                    throw UsageError(message: "cannot read --public-key-file \(file) for key id \(keyID)")
                }
                keys.append(SimulatorProviderKey(keyID: keyID, publicKeyPEM: pem))
            }
            configuration.authentication = .providerToken(keys: keys)
        }
        if let caFile = arguments.value("--client-ca-file") {
            guard keyIDs.isEmpty else {
                throw UsageError(message: "choose token authentication (--key-id) or certificates (--client-ca-file)")
            }
            configuration.authentication = .certificate(clientCAFile: caFile)
        }
        if let rate = try rate(arguments, "--unregistered-rate") { configuration.devices.unregisteredRate = rate }
        if let rate = try rate(arguments, "--bad-token-rate") { configuration.devices.badTokenRate = rate }
        if let rate = try rate(arguments, "--fail-rate") { configuration.faults.failureRate = rate }
        let retryAfter = try arguments.integer("--retry-after", range: 0...86_400)
        if let status = try arguments.integer("--fail-status") {
            guard let failure = InjectedFailure.forStatus(status, retryAfterSeconds: retryAfter) else {
                throw UsageError(message: "--fail-status must be 429, 500 or 503, got \(status)")
            }
            configuration.faults.failure = failure
        } else if let retryAfter {
            configuration.faults.failure.retryAfterSeconds = retryAfter
        }
        if let rate = try rate(arguments, "--stall-rate") { configuration.faults.stallRate = rate }
        if let rate = try rate(arguments, "--drop-rate") { configuration.faults.dropConnectionRate = rate }
        if let after = try arguments.integer("--go-away-after", range: 1...Int.max) {
            configuration.faults.goAwayAfterStreams = after
        }
        if let maximum = try arguments.integer("--max-concurrent-streams", range: 1...Int(UInt32.max)) {
            configuration.faults.maxConcurrentStreams = UInt32(maximum)
        }
        if let spec = arguments.value("--latency-ms") { configuration.faults.latency = try latency(spec) }
        if let milliseconds = try arguments.integer("--handshake-ms", range: 0...600_000) {
            configuration.faults.handshakeMilliseconds = Double(milliseconds)
        }
        if let spec = arguments.value("--device-limit") {
            let parts = spec.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, let requests = Int(parts[0]), let window = Int(parts[1]), requests >= 1,
                window >= 1
            else {
                throw UsageError(
                    message: "--device-limit takes N/MS (requests per window in milliseconds, e.g. 5/1000), "
                        + "got '\(spec)'")
            }
            configuration.faults.deviceLimit = DeviceRequestLimit(requests: requests, windowMilliseconds: window)
        }
        switch (arguments.value("--cert-file"), arguments.value("--key-file")) {
        case (let certificate?, let key?): configuration.tls = .files(certificate: certificate, privateKey: key)
        case (nil, nil): break
        default: throw UsageError(message: "give both --cert-file and --key-file, or neither")
        }
        if let caOut = arguments.value("--ca-out") { configuration.caOutputPath = caOut }
        if let seed = try arguments.integer("--seed", range: 0...Int.max) { configuration.seed = UInt64(seed) }
        do {
            try configuration.validate()
        } catch {
            throw UsageError(message: error.message)
        }
        return configuration
    }

    static func rate(_ arguments: ParsedArguments, _ name: String) throws -> Double? {
        guard let text = arguments.value(name) else { return nil }
        guard let rate = Double(text), rate >= 0, rate <= 1 else {
            throw UsageError(message: "\(name) needs a number between 0 and 1, got '\(text)'")
        }
        return rate
    }

    /// `5`, `5-15`, `exp:3` or `5+exp:3` (milliseconds).
    static func latency(_ spec: String, option: String = "--latency-ms") throws -> LatencyDistribution {
        let problem = UsageError(
            message: "\(option) takes FIXED, MIN-MAX, exp:MEAN or FIXED+exp:MEAN "
                + "(milliseconds), got '\(spec)'")
        func number(_ text: Substring) throws -> Double {
            guard let value = Double(text), value >= 0 else { throw problem }
            return value
        }
        if let plus = spec.firstIndex(of: "+") {
            let fixed = try number(spec[..<plus])
            let rest = spec[spec.index(after: plus)...]
            guard rest.hasPrefix("exp:") else { throw problem }
            let mean = try number(rest.dropFirst(4))
            return LatencyDistribution(fixedMilliseconds: fixed, jitter: .exponential(meanMilliseconds: mean))
        }
        if spec.hasPrefix("exp:") {
            return LatencyDistribution(jitter: .exponential(meanMilliseconds: try number(spec.dropFirst(4))))
        }
        if let dash = spec.firstIndex(of: "-") {
            let low = try number(spec[..<dash])
            let high = try number(spec[spec.index(after: dash)...])
            guard high >= low else { throw problem }
            return LatencyDistribution(fixedMilliseconds: low, jitter: .uniform(maximumMilliseconds: high - low))
        }
        return LatencyDistribution(fixedMilliseconds: try number(Substring(spec)))
    }

    static func describe(_ authentication: SimulatorAuthentication) -> String {
        switch authentication {
        case .none: return "none (every request is accepted without credentials)"
        case .providerToken(let keys, _, _): return "token (key ids: \(keys.map(\.keyID).joined(separator: ", ")))"
        case .certificate(let caFile): return "certificate (client CA: \(caFile))"
        }
    }
}
