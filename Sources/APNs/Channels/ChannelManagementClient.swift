// Apple's channel management API for broadcast push ("Sending channel management requests to APNs"):
// create a channel with a message storage policy, read it, delete it, list an app's channels, on the
// management hosts of each environment with the same token or certificate credential as pushes.

public import HTTP2
import JSON

/// How long APNs keeps a broadcast for devices that are offline (Apple's `message-storage-policy`).
public enum MessageStoragePolicy: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// 0: "No Message Stored": a broadcast reaches the devices online now, or none.
    case noMessageStored = 0
    /// 1: "Most Recent Message Stored": APNs keeps the latest broadcast for devices that come online.
    case mostRecentMessageStored = 1

    public var description: String { String(rawValue) }
}

/// A channel as `read` returns it.
public struct ChannelConfiguration: Sendable, Hashable {
    public var channelID: ChannelID
    public var storagePolicy: MessageStoragePolicy
    /// Apple's `push-type` of the channel: `LiveActivity`.
    public var pushType: String
}

/// A management request APNs refused, or whose answer was not what Apple documents.
public struct ChannelManagementError: Error, Sendable, CustomStringConvertible {
    /// The HTTP status; nil when nothing came back (transport failure).
    public var status: Int?
    /// APNs' reason, when the body carried one.
    public var reason: APNsErrorReason?
    /// The `apns-request-id` APNs answered with, for Apple's support.
    public var requestID: String?
    public var message: String

    public var description: String { message }
}

extension APNsEnvironment {
    /// Apple, "Sending channel management requests to APNs": the development server is
    /// api-manage-broadcast.sandbox.push.apple.com:2195, the production server
    /// api-manage-broadcast.push.apple.com:2196 (each its own port, unlike pushes).
    public var channelManagementHost: String {
        switch self {
        case .sandbox: return "api-manage-broadcast.sandbox.push.apple.com"
        case .production: return "api-manage-broadcast.push.apple.com"
        }
    }

    public var channelManagementPort: Int {
        switch self {
        case .sandbox: return 2195
        case .production: return 2196
        }
    }
}

/// A client of the channel management API for one credential.
///
/// - Important: thread-safe. Call `shutdown()` when done.
public final class ChannelManagementClient: Sendable {
    private let signer: ProviderTokenSigner?
    private let sandboxPool: ConnectionPool
    private let productionPool: ConnectionPool
    private let requestTimeout: Duration

    /// Takes the push client's configuration (credential, `endpointOverride` for tests, trust roots,
    /// timeouts) and connects to the management host of each environment unless it is overridden.
    /// Connects only on the first request.
    public init(configuration: APNsClient.Configuration, group: EventLoopGroup = .shared) throws(HTTP2ClientError) {
        if case .token(let signer) = configuration.credential { self.signer = signer } else { self.signer = nil }
        requestTimeout = configuration.requestTimeout
        func pool(_ environment: APNsEnvironment) throws(HTTP2ClientError) -> ConnectionPool {
            var management = configuration
            management.connectionsPerEnvironment = 1
            if management.endpointOverride == nil {
                management.endpointOverride =
                    "https://\(environment.channelManagementHost):\(environment.channelManagementPort)"
            }
            return try ConnectionPool(configuration: management.poolConfiguration(for: environment), group: group)
        }
        sandboxPool = try pool(.sandbox)
        productionPool = try pool(.production)
    }

    /// Creates a Live Activity channel: `POST /1/apps/{bundle}/channels` with
    /// `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`; APNs answers 201 with the new id
    /// in `apns-channel-id`.
    public func create(bundle: String, environment: APNsEnvironment, storagePolicy: MessageStoragePolicy)
        async throws(ChannelManagementError) -> ChannelID
    {
        let body = JSONValue.object([
            "message-storage-policy": .int(Int64(storagePolicy.rawValue)), "push-type": .string("LiveActivity"),
        ])
        let response = try await exchange(
            "POST", path: "/1/apps/\(bundle)/channels", environment: environment, channel: nil,
            body: body.compactBytes, expecting: 201)
        guard let text = response.header("apns-channel-id"), let id = try? ChannelID(text) else {
            throw ChannelManagementError(
                status: response.status, requestID: response.header("apns-request-id"),
                message: "APNs answered 201 but gave no usable apns-channel-id header")
        }
        return id
    }

    /// Reads a channel: `GET /1/apps/{bundle}/channels` with `apns-channel-id`; 200 with its configuration.
    public func read(bundle: String, environment: APNsEnvironment, channel: ChannelID)
        async throws(ChannelManagementError) -> ChannelConfiguration
    {
        let response = try await exchange(
            "GET", path: "/1/apps/\(bundle)/channels", environment: environment, channel: channel, body: [],
            expecting: 200)
        guard let json = try? JSONValue(parsing: response.body),
            let policy = json["message-storage-policy"]?.intValue.flatMap({ MessageStoragePolicy(rawValue: Int($0)) })
        else {
            throw ChannelManagementError(
                status: response.status, requestID: response.header("apns-request-id"),
                message: "APNs answered 200 but the body is not a channel configuration: "
                    + String(decoding: response.body.prefix(200), as: UTF8.self))
        }
        return ChannelConfiguration(
            channelID: channel, storagePolicy: policy, pushType: json["push-type"]?.stringValue ?? "LiveActivity")
    }

    /// Deletes a channel: `DELETE /1/apps/{bundle}/channels` with `apns-channel-id`; 204.
    public func delete(bundle: String, environment: APNsEnvironment, channel: ChannelID)
        async throws(ChannelManagementError)
    {
        _ = try await exchange(
            "DELETE", path: "/1/apps/\(bundle)/channels", environment: environment, channel: channel, body: [],
            expecting: 204)
    }

    /// Every channel of the app: `GET /1/apps/{bundle}/all-channels`; 200 with `{"channels": [...]}`.
    public func list(bundle: String, environment: APNsEnvironment) async throws(ChannelManagementError)
        -> [ChannelID]
    {
        let response = try await exchange(
            "GET", path: "/1/apps/\(bundle)/all-channels", environment: environment, channel: nil, body: [],
            expecting: 200)
        guard let json = try? JSONValue(parsing: response.body), case .array(let items)? = json["channels"] else {
            throw ChannelManagementError(
                status: response.status, requestID: response.header("apns-request-id"),
                message: "APNs answered 200 but the body has no channels list: "
                    + String(decoding: response.body.prefix(200), as: UTF8.self))
        }
        return items.compactMap { $0.stringValue.flatMap { try? ChannelID($0) } }
    }

    public func shutdown(gracePeriod: Duration = .seconds(1)) async {
        await sandboxPool.shutdown(gracePeriod: gracePeriod)
        await productionPool.shutdown(gracePeriod: gracePeriod)
    }

    /// One request and its answer; a status other than `expecting` throws with APNs' reason.
    private func exchange(
        _ method: String, path: String, environment: APNsEnvironment, channel: ChannelID?, body: [UInt8],
        expecting: Int
    ) async throws(ChannelManagementError) -> HTTP2Response {
        let pool = environment == .sandbox ? sandboxPool : productionPool
        var headers: [HTTP2Header] = []
        if let signer {
            do {
                headers.append(HTTP2Header("authorization", try signer.token().authorizationHeaderValue))
            } catch {
                throw ChannelManagementError(message: "cannot make a provider token: \(error)")
            }
        }
        let requestID = APNsID.random()
        headers.append(HTTP2Header("apns-request-id", requestID.string, isIndexable: false))
        if let channel { headers.append(HTTP2Header("apns-channel-id", channel.value, isIndexable: false)) }
        if !body.isEmpty { headers.append(HTTP2Header("content-type", "application/json")) }
        let request = HTTP2Request(
            method: method, scheme: "https", authority: pool.authority, path: path, headers: headers, body: body)
        let response: HTTP2Response
        do {
            response = try await pool.send(request, timeout: requestTimeout)
        } catch let error as HTTP2ClientError {
            throw ChannelManagementError(message: "\(method) \(path): \(error.message)")
        } catch {
            throw ChannelManagementError(message: "\(method) \(path): \(error)")
        }
        guard response.status == expecting else {
            let reason = (try? JSONValue(parsing: response.body))?["reason"]?.stringValue.map(APNsErrorReason.init)
            throw ChannelManagementError(
                status: response.status, reason: reason, requestID: response.header("apns-request-id"),
                message: "\(method) \(path) was refused: HTTP \(response.status)"
                    + (reason.map { " \($0.rawValue)" } ?? ""))
        }
        return response
    }
}
