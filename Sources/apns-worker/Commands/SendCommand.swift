// `apns-worker send`: builds one APNs request from flags, checks it, and prints it as JSON
// (--dry-run) or as the equivalent curl command (--curl), or sends it (SendCommand+Sending.swift:
// `send(_:arguments:)` and its connection and credential options, `sendingOptions`).

import APNs
import Foundation

struct SendCommand: Command {
    static let name = "send"
    static let summary = "Send one push notification, or check it and print it (--dry-run) or as curl (--curl)."
    static let discussion = """
        Checks the request against APNs' rules (token, topic suffix, priority for the push type,
        payload keys, types and size) and reports every problem at once, one per line, exit 1.
        --topic takes the app's bundle id; the push type's suffix (.voip, .push-type.liveactivity, ...)
        is added unless it is there already. Without --payload, alert sends
        {"aps":{"alert":"Hello from apns-worker"}} and background {"aps":{"content-available":1}}.
        --dry-run prints the request as one JSON object (the authorization header is left out: a dry
        run uses no credentials); --curl prints a curl command that reads the provider token from
        $AUTHENTICATION_TOKEN.
        Without --dry-run or --curl the notification is sent over HTTP/2 (token auth with --key-file,
        --key-id and --team-id, or certificate auth with --cert-file) and APNs' answer is printed as
        one JSON object: status (delivered, rejected or failed), http_status, apns_id, apns_unique_id,
        reason, timestamp and every attempt. Exit 0 when delivered, 1 otherwise. --endpoint points at
        another server (the simulator, a test server), whose CA --ca-file names.

        examples:
          apns-worker send --dry-run --device-token '<0a1b2c3d ...>' --topic com.example.app \\
              --payload '{"aps":{"alert":{"title":"Hi","body":"there"}}}'
          apns-worker send --environment sandbox --key-file AuthKey_ABC123DEFG.p8 --key-id ABC123DEFG \\
              --team-id DEF123GHIJ --device-token '<0a1b2c3d ...>' --topic com.example.app
          apns-worker send --channel-id c29tZUNoYW5uZWw= --topic com.example.app --push-type liveactivity \\
              --payload '{"aps":{"event":"update","timestamp":1700000000,"content-state":{}}}' ...
        """

    /// What the request is made of.
    static let requestOptions: [OptionSpec] = [
        .value("--device-token", "HEX", "The device token (spaces, <> and upper case are fine)."),
        .value("--channel-id", "ID", "Broadcast to this channel instead (liveactivity; see `channels create`)."),
        .value("--topic", "BUNDLE", "The app's bundle id, or the full topic with the push type's suffix."),
        .value("--push-type", "TYPE", "alert (default), background, voip, liveactivity, ... (any APNs push type)."),
        .value("--priority", "N", "10, 5 or 1. Default: 10, or 5 where the push type needs it."),
        .value("--expiration", "SECONDS", "0 (try once, do not store) or a UNIX time. Default: Apple's storage."),
        .value("--collapse-id", "ID", "Replaces an earlier notification with the same id (at most 64 bytes)."),
        .value("--apns-id", "UUID", "The request's id. Default: a fresh random UUID."),
        .value("--payload", "JSON", "The payload as JSON text."),
        .value("--payload-file", "FILE", "Read the payload from FILE ('-' for standard input)."),
        .value("--environment", "ENV", "sandbox (also: development) or production. Default: production."),
    ]

    /// How the request is handled.
    static let modeOptions: [OptionSpec] = [
        .flag("--dry-run", "Check the request and print it as JSON instead of sending it."),
        .flag("--curl", "Check the request and print it as an equivalent curl command."),
    ]

    static let options = requestOptions + modeOptions + sendingOptions

    enum Mode {
        case dryRun, curl, send
    }

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let mode: Mode = arguments.has("--curl") ? .curl : arguments.has("--dry-run") ? .dryRun : .send
        let request: APNsRequest
        do {
            request = try makeRequest(arguments)
        } catch let invalid as APNsInvalidRequest {
            for problem in invalid.problems { standardError(problem.description) }
            return 1
        }
        switch mode {
        case .dryRun:
            print(dryRunJSON(request.wire(authorization: nil)))
            return 0
        case .curl:
            print(curlCommand(request.wire(authorization: nil)))
            return 0
        case .send:
            return try await send(request, arguments: arguments)
        }
    }

    /// The request from the flags, or every problem with it.
    static func makeRequest(_ arguments: ParsedArguments) throws -> APNsRequest {
        let topic = try arguments.required("--topic")
        switch (arguments.value("--device-token"), arguments.value("--channel-id")) {
        case (.some, .some):
            throw UsageError(message: "give one target: --device-token HEX or --channel-id ID, not both")
        case (nil, nil):
            throw UsageError(message: "missing required option --device-token (or --channel-id ID for a broadcast)")
        case (nil, .some(let channel)):
            return try APNsRequest.parse(
                channelID: channel, environment: arguments.value("--environment"), bundleOrTopic: topic,
                pushType: arguments.value("--push-type"), priority: arguments.value("--priority"),
                expiration: arguments.value("--expiration"), collapseID: arguments.value("--collapse-id"),
                apnsID: arguments.value("--apns-id"), payloadJSON: payloadBytes(arguments))
        case (.some, nil):
            break
        }
        let deviceToken = try arguments.required("--device-token")
        let payloadText = try payloadBytes(arguments)
        return try APNsRequest.parse(
            deviceToken: deviceToken, environment: arguments.value("--environment"), bundleOrTopic: topic,
            pushType: arguments.value("--push-type"), priority: arguments.value("--priority"),
            expiration: arguments.value("--expiration"), collapseID: arguments.value("--collapse-id"),
            apnsID: arguments.value("--apns-id"), payloadJSON: payloadText)
    }

    /// Payload files larger than this are refused unread: APNs' largest payload is 5120 bytes.
    static let payloadFileLimit = 64 * 1024

    /// The payload's JSON text from --payload, --payload-file, or the push type's default.
    static func payloadBytes(_ arguments: ParsedArguments) throws -> [UInt8] {
        switch (arguments.value("--payload"), arguments.value("--payload-file")) {
        case (.some, .some):
            throw UsageError(message: "give the payload once: --payload JSON or --payload-file FILE, not both")
        case (.some(let text), nil):
            return Array(text.utf8)
        case (nil, .some(let path)):
            return try readPayloadFile(path)
        case (nil, nil):
            let type = arguments.value("--push-type").flatMap { try? PushType(parsing: $0) } ?? .alert
            switch type {
            case .alert: return Array(#"{"aps":{"alert":"Hello from apns-worker"}}"#.utf8)
            case .background: return Array(#"{"aps":{"content-available":1}}"#.utf8)
            default:
                throw UsageError(
                    message: "push type \(type) has no default payload; give --payload JSON or "
                        + "--payload-file FILE")
            }
        }
    }

    static func readPayloadFile(_ path: String) throws -> [UInt8] {
        let handle = path == "-" ? FileHandle.standardInput : FileHandle(forReadingAtPath: path)
        guard let handle else {
            var isDirectory: ObjCBool = false
            let why =
                !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
                ? "no such file" : isDirectory.boolValue ? "it is a directory" : "permission denied"
            standardError("payload-file: cannot read '\(path)': \(why)")
            throw ExitCode(1)
        }
        let data: Data
        do {
            data = try handle.read(upToCount: payloadFileLimit + 1) ?? Data()
        } catch {
            standardError("payload-file: cannot read '\(path)': \(error.localizedDescription)")
            throw ExitCode(1)
        }
        if data.count > payloadFileLimit {
            standardError(
                "payload-file: '\(path)' is over \(payloadFileLimit / 1024) KiB; an APNs payload is at most "
                    + "\(PushType.voip.payloadLimit) bytes")
            throw ExitCode(1)
        }
        return [UInt8](data)
    }
}
