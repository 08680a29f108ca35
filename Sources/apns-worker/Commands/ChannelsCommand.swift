// `apns-worker channels create | get | delete | list`: Apple's channel management API for broadcast
// push (iOS 18 Live Activities), with the credential and endpoint flags of `send`, answers as JSON.

import APNs
import JSON

/// What the four channel commands share: their flags, the client, and printing an answer or an error.
enum ChannelsCommandSupport {
    static let appOption = OptionSpec.value("--app", "BUNDLE", "The app's bundle id (com.example.app).")
    static let environmentOption = OptionSpec.value(
        "--environment", "ENV", "sandbox (also: development) or production. Default: production.")
    static let channelOption = OptionSpec.value("--channel-id", "ID", "The channel, as `channels create` printed it.")

    static let discussion = """
        Talks to Apple's channel management servers (api-manage-broadcast.sandbox.push.apple.com:2195,
        api-manage-broadcast.push.apple.com:2196) with the credential flags of `send`; --endpoint
        points at another server (the simulator). Prints APNs' answer as one JSON object; on a refusal
        prints what APNs said on standard error and exits 1.

        examples:
          apns-worker channels create --app com.example.app --environment sandbox --storage-policy 1 \\
              --key-file AuthKey_ABC123DEFG.p8 --key-id ABC123DEFG --team-id DEF123GHIJ
          apns-worker channels list --app com.example.app --environment sandbox --key-file ...
        """

    static func options(_ own: [OptionSpec]) -> [OptionSpec] {
        [appOption, environmentOption] + own + SendCommand.sendingOptions
    }

    /// Runs `body` with a client for the flags' credential and endpoint; prints its JSON, or the error.
    static func run(
        _ arguments: ParsedArguments,
        _ body: (ChannelManagementClient, String, APNsEnvironment) async throws(ChannelManagementError) -> JSONValue
    ) async throws -> Int32 {
        let bundle = try arguments.required("--app")
        let environment: APNsEnvironment
        do {
            environment = try APNsEnvironment(parsing: arguments.value("--environment") ?? "production")
        } catch {
            throw UsageError(message: "--environment: \(error.message)")
        }
        let timeout = try arguments.integer("--timeout", default: 30, range: 1...300)!
        let credential = try ClientOptions.credential(arguments, required: true)!
        var configuration = APNsClient.Configuration(credential: credential)
        try ClientOptions.applyConnectionOptions(arguments, to: &configuration)
        configuration.requestTimeout = .seconds(timeout)
        configuration.connectTimeout = .seconds(min(timeout, 10))
        let client: ChannelManagementClient
        do {
            client = try ChannelManagementClient(configuration: configuration)
        } catch {
            standardError("apns-worker: \(error.message)")
            return 1
        }
        let result: Result<JSONValue, ChannelManagementError>
        do throws(ChannelManagementError) {
            result = .success(try await body(client, bundle, environment))
        } catch {
            result = .failure(error)
        }
        await client.shutdown()
        switch result {
        case .success(let json):
            print(json.compactString)
            return 0
        case .failure(let error):
            var object = JSONObject()
            object["status"] = .string("failed")
            object["http_status"] = error.status.map { .int(Int64($0)) } ?? .null
            object["reason"] = error.reason.map { .string($0.rawValue) } ?? .null
            object["apns_request_id"] = error.requestID.map { .string($0) } ?? .null
            print(JSONValue.object(object).compactString)
            standardError("apns-worker: \(error.message)" + hint(error.reason))
            return 1
        }
    }

    /// What to do about the reasons a person can act on.
    static func hint(_ reason: APNsErrorReason?) -> String {
        switch reason {
        case .channelNotRegistered?:
            return "; the channel does not exist in this environment (deleted, or created in the other one)"
        case .cannotCreateChannelConfig?:
            return "; the app has the most channels Apple allows (10,000): delete ones no longer used"
        case .featureNotEnabled?:
            return "; enable the broadcast capability of the app in the Apple Developer account"
        default: return ""
        }
    }

    static func channel(_ arguments: ParsedArguments) throws -> ChannelID {
        let text = try arguments.required("--channel-id")
        do {
            return try ChannelID(text)
        } catch {
            throw UsageError(message: "--channel-id: \(error.message)")
        }
    }

    static func json(_ bundle: String, _ environment: APNsEnvironment, _ members: [String: JSONValue]) -> JSONValue {
        var object = JSONObject()
        object["app"] = .string(bundle)
        object["environment"] = .string(environment.rawValue)
        for key in members.keys.sorted() { object[key] = members[key] }
        return .object(object)
    }
}

struct ChannelsCreateCommand: Command {
    static let name = "channels create"
    static let summary = "Create a broadcast channel for an app's Live Activities; prints its id."
    static let discussion =
        "--storage-policy 0 keeps no broadcast for offline devices, 1 keeps the most recent one.\n"
        + ChannelsCommandSupport.discussion
    static let options = ChannelsCommandSupport.options([
        .value("--storage-policy", "0|1", "Message storage policy: 0 none, 1 the most recent. Default: 0.")
    ])

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let raw = try arguments.integer("--storage-policy", default: 0, range: 0...1)!
        let policy = MessageStoragePolicy(rawValue: raw)!
        return try await ChannelsCommandSupport.run(arguments) {
            client, bundle, environment throws(ChannelManagementError) in
            let id = try await client.create(bundle: bundle, environment: environment, storagePolicy: policy)
            return ChannelsCommandSupport.json(
                bundle, environment,
                ["channel_id": .string(id.value), "message_storage_policy": .int(Int64(policy.rawValue))])
        }
    }
}

struct ChannelsGetCommand: Command {
    static let name = "channels get"
    static let summary = "Show a broadcast channel's configuration (message storage policy, push type)."
    static let discussion = ChannelsCommandSupport.discussion
    static let options = ChannelsCommandSupport.options([ChannelsCommandSupport.channelOption])

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let channel = try ChannelsCommandSupport.channel(arguments)
        return try await ChannelsCommandSupport.run(arguments) {
            client, bundle, environment throws(ChannelManagementError) in
            let configuration = try await client.read(bundle: bundle, environment: environment, channel: channel)
            return ChannelsCommandSupport.json(
                bundle, environment,
                [
                    "channel_id": .string(channel.value),
                    "message_storage_policy": .int(Int64(configuration.storagePolicy.rawValue)),
                    "push_type": .string(configuration.pushType),
                ])
        }
    }
}

struct ChannelsDeleteCommand: Command {
    static let name = "channels delete"
    static let summary = "Delete a broadcast channel; broadcasts on it are refused from then on."
    static let discussion = ChannelsCommandSupport.discussion
    static let options = ChannelsCommandSupport.options([ChannelsCommandSupport.channelOption])

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let channel = try ChannelsCommandSupport.channel(arguments)
        return try await ChannelsCommandSupport.run(arguments) {
            client, bundle, environment throws(ChannelManagementError) in
            try await client.delete(bundle: bundle, environment: environment, channel: channel)
            return ChannelsCommandSupport.json(
                bundle, environment, ["channel_id": .string(channel.value), "deleted": .bool(true)])
        }
    }
}

struct ChannelsListCommand: Command {
    static let name = "channels list"
    static let summary = "List every broadcast channel of an app in one environment."
    static let discussion = ChannelsCommandSupport.discussion
    static let options = ChannelsCommandSupport.options([])

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        try await ChannelsCommandSupport.run(arguments) { client, bundle, environment throws(ChannelManagementError) in
            let channels = try await client.list(bundle: bundle, environment: environment)
            return ChannelsCommandSupport.json(
                bundle, environment, ["channels": .array(channels.map { .string($0.value) })])
        }
    }
}
