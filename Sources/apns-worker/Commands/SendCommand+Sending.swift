// `apns-worker send` without --dry-run: connects to APNs (or --endpoint) with a token or certificate
// credential, sends the one notification with retries, and prints the result as one JSON object.

import APNs
import Foundation
import HTTP2
import JSON

extension SendCommand {
    /// Connection and credential options for sending.
    static let sendingOptions: [OptionSpec] =
        ClientOptions.connectionOptions + ClientOptions.proxyOptions + ClientOptions.credentialOptions + [
            .value("--attempts", "N", "Attempts at most, retries included (1-10). Default: 3."),
            .value("--timeout", "SECONDS", "Give up on one attempt after this long (1-300). Default: 30."),
        ]

    /// Sends the request and prints APNs' answer; exit 0 when delivered, 1 when rejected or failed.
    static func send(_ request: APNsRequest, arguments: ParsedArguments) async throws -> Int32 {
        let attempts = try arguments.integer("--attempts", default: 3, range: 1...10)!
        let timeout = try arguments.integer("--timeout", default: 30, range: 1...300)!
        let credential = try ClientOptions.credential(arguments, required: true)!
        var configuration = APNsClient.Configuration(credential: credential)
        try ClientOptions.applyConnectionOptions(arguments, to: &configuration)
        configuration.connectionsPerEnvironment = 1
        configuration.requestTimeout = .seconds(timeout)
        configuration.connectTimeout = .seconds(min(timeout, 10))
        let client = try ClientOptions.makeClient(configuration)
        let policy = RetryPolicy(maximumAttempts: attempts, maximumTotalTime: .seconds(timeout * attempts))
        let result = await client.send(request, policy: policy)
        await client.shutdown(gracePeriod: .seconds(1))
        print(resultJSON(result).compactString)
        return result.status == .delivered ? 0 : 1
    }

    /// The result as outcome records describe it (snake_case keys, latency in milliseconds).
    static func resultJSON(_ result: DeliveryResult) -> JSONValue {
        var object = JSONObject()
        object["status"] = .string(result.status.rawValue)
        object["http_status"] = result.response.map { .int(Int64($0.status)) } ?? .null
        object["apns_id"] = result.finalAPNsID.map { .string($0.string) } ?? .null
        object["apns_unique_id"] = result.response?.apnsUniqueID.map { .string($0) } ?? .null
        object["reason"] = result.response?.reason.map { .string($0.rawValue) } ?? .null
        object["timestamp"] = result.response?.timestampMilliseconds.map { .int($0) } ?? .null
        object["summary"] = .string(result.summary)
        object["attempts"] = .array(
            result.attempts.map { attempt in
                var entry = JSONObject()
                entry["apns_id"] = .string(attempt.apnsID.string)
                entry["http_status"] = attempt.httpStatus.map { .int(Int64($0)) } ?? .null
                entry["reason"] = attempt.reason.map { .string($0) } ?? .null
                if let message = attempt.errorMessage { entry["error"] = .string(message) }
                entry["started_at"] = .string(ISO8601DateFormatter().string(from: attempt.startedAt))
                entry["latency_ms"] = .double((attempt.latencyMilliseconds * 1000).rounded() / 1000)
                return .object(entry)
            })
        return .object(object)
    }
}

/// Flags shared by the commands that talk to APNs (`send`, `bench send`): where to connect and with
/// which credential. Secrets come from files or the environment, never from the command line.
enum ClientOptions {
    static let connectionOptions: [OptionSpec] = [
        .value("--endpoint", "URL", "Connect to https://host[:port] instead of Apple (a simulator, a test server)."),
        .value("--ca-file", "FILE", "Trust only the CA certificates in this PEM file (for test servers)."),
    ]

    /// Applied by `applyConnectionOptions`, so every command that lists them gets them.
    static let proxyOptions: [OptionSpec] = [
        .value(
            "--proxy", "URL",
            "Tunnel through this HTTP proxy (http://host:port, CONNECT), or none. Default: HTTPS_PROXY "
                + "unless NO_PROXY exempts the host."),
        .value("--proxy-credentials-file", "FILE", "File holding user:password for the proxy's Basic auth."),
    ]

    static let credentialOptions: [OptionSpec] = [
        .value(
            "--key-file", "FILE",
            "Token auth: the .p8 signing key (or, with --cert-file, the certificate's "
                + "PEM key)."),
        .value("--key-id", "KEY_ID", "Token auth: the key's 10-character Key ID."),
        .value("--team-id", "TEAM_ID", "Token auth: your 10-character Team ID."),
        .value("--key-password-file", "FILE", "File holding the password of an encrypted .p8 key."),
        .value("--cert-file", "FILE", "Certificate auth: the client certificate, PKCS#12 (.p12) or PEM."),
        .value("--password-file", "FILE", "File holding the .p12 (or encrypted PEM key) password."),
    ]

    /// The credential the flags name; nil when none is given and `required` is false.
    static func credential(_ arguments: ParsedArguments, required: Bool) throws -> APNsCredential? {
        if let certificateFile = arguments.value("--cert-file") {
            if arguments.value("--key-id") != nil || arguments.value("--team-id") != nil {
                throw UsageError(
                    message: "--key-id and --team-id belong to a .p8 key, not to --cert-file; "
                        + "give either --cert-file or --key-file with --key-id and --team-id")
            }
            let password = try CredentialOptions.password(
                file: arguments.value("--password-file"),
                variable: CredentialOptions.certificatePasswordVariable)
            let identity = try CertificateIdentity(
                certificateFile: certificateFile,
                keyFile: arguments.value("--key-file"), password: password)
            return .certificate(identity)
        }
        if arguments.value("--key-file") != nil {
            return .token(try ProviderTokenSigner(key: try CredentialOptions.loadSigningKey(arguments)))
        }
        if required {
            throw UsageError(
                message: "sending needs a credential: --key-file FILE --key-id KEY_ID --team-id TEAM_ID "
                    + "(token auth) or --cert-file FILE (certificate auth); or use --dry-run")
        }
        return nil
    }

    static func applyConnectionOptions(_ arguments: ParsedArguments, to configuration: inout APNsClient.Configuration)
        throws
    {
        if let endpoint = arguments.value("--endpoint") {
            do {
                _ = try ConnectionPool.Configuration.init(url: endpoint)
            } catch {
                throw UsageError(message: "--endpoint: \(error.message)")
            }
            configuration.endpointOverride = endpoint
        }
        if let caFile = arguments.value("--ca-file") {
            configuration.trustRoots = .caFile(caFile)
        }
        configuration.proxy = try proxy(arguments, endpoint: configuration.endpointOverride)
    }

    /// The proxy `--proxy` names, or the environment's (HTTPS_PROXY unless NO_PROXY exempts the host:
    /// --endpoint's, else Apple's), with `--proxy-credentials-file`'s credentials; nil for direct.
    static func proxy(_ arguments: ParsedArguments, endpoint: String?) throws -> HTTPProxy? {
        let credentialsFile = arguments.value("--proxy-credentials-file")
        var proxy: HTTPProxy?
        do {
            if let url = arguments.value("--proxy") {
                if url.lowercased() == "none" {
                    if credentialsFile != nil {
                        throw UsageError(message: "--proxy-credentials-file needs a proxy, but --proxy is none")
                    }
                    return nil
                }
                proxy = try HTTPProxy(url: url, source: "--proxy")
            } else {
                let (host, port) =
                    try endpoint.map { try ConnectionPool.Configuration.parse(url: $0) }
                    ?? (APNsEnvironment.production.host, APNsEnvironment.port)
                proxy = try HTTPProxy.fromEnvironment(ProcessInfo.processInfo.environment, host: host, port: port)
            }
            if let credentialsFile {
                guard proxy != nil else {
                    throw UsageError(
                        message: "--proxy-credentials-file needs a proxy: give --proxy URL (or set HTTPS_PROXY)")
                }
                proxy?.credentials = try HTTPProxy.Credentials(contentsOfFile: credentialsFile)
            }
        } catch let error as HTTP2ClientError {
            throw UsageError(message: error.message)
        }
        return proxy
    }

    /// A client, or exit 1 with the configuration problem (unreadable CA file, unusable identity).
    static func makeClient(_ configuration: APNsClient.Configuration, group: EventLoopGroup = .shared) throws
        -> APNsClient
    {
        do {
            return try APNsClient(configuration: configuration, group: group)
        } catch {
            standardError("apns-worker: \(error.message)")
            throw ExitCode(1)
        }
    }
}
