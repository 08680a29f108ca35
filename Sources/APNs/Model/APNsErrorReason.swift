// APNs' error reasons, their HTTP status and what a sender should do about each
// (the table in /work/shared/reference/apns.md, "Response").

/// What a sender should do after an error response.
public enum APNsReasonClass: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Try again later with exponential backoff (and `Retry-After` when given), with a fresh apns-id.
    case retryWithBackoff
    /// This connection is no good (idle timeout, server shutting down, a different key):
    /// retry on a new connection.
    case retryOnNewConnection
    /// The provider token expired: sign a new one, then retry.
    case refreshProviderToken
    /// The device token is dead for this topic and environment: stop sending to it, publish it.
    case invalidToken
    /// The certificate or signing key is wrong: stop using this credential until fixed.
    case badCredential
    /// The request itself is wrong; sending it again gives the same answer.
    case permanent

    public var description: String { rawValue }

    /// The class of a reason this code does not know, from the HTTP status alone:
    /// 5xx and 429 are worth retrying later, anything else is not.
    public init(unknownReasonStatus status: Int) {
        self = (status >= 500 && status <= 599) || status == 429 ? .retryWithBackoff : .permanent
    }
}

/// The `reason` of an APNs error response. Cases are named after Apple's strings (`BadDeviceToken`
/// is `.badDeviceToken`); `httpStatus` and `knownClass` give the table's status and class.
public enum APNsErrorReason: Sendable, Hashable, CustomStringConvertible {
    case badCollapseId
    case badDeviceToken
    case badExpirationDate
    case badMessageId
    case badPriority
    case badTopic
    case deviceTokenNotForTopic
    case duplicateHeaders
    case idleTimeout
    case invalidPushType
    case missingDeviceToken
    case missingTopic
    case payloadEmpty
    case topicDisallowed
    case badCertificate
    case badCertificateEnvironment
    case expiredProviderToken
    case forbidden
    case invalidProviderToken
    case missingProviderToken
    case unrelatedKeyIdInToken
    case badEnvironmentKeyIdInToken
    case badPath
    case methodNotAllowed
    case expiredToken
    case unregistered
    case payloadTooLarge
    case tooManyProviderTokenUpdates
    case tooManyRequests
    case internalServerError
    case serviceUnavailable
    case shutdown
    // Broadcast channels (Apple, "Sending channel management requests to APNs" and "Sending broadcast
    // push notification requests to APNs"; all answered with 400).
    /// The request has no `apns-channel-id` header.
    case missingChannelId
    /// The `apns-channel-id` is not a channel id.
    case badChannelId
    /// The channel does not exist (never created in this environment, or deleted).
    case channelNotRegistered
    /// The app already has the most channels Apple allows (10,000 per environment).
    case cannotCreateChannelConfig
    /// The app's broadcast capability is not enabled.
    case featureNotEnabled
    /// A reason Apple added after this code was written, kept as sent.
    case unknown(String)

    /// Every reason in Apple's table.
    public static let allKnown: [APNsErrorReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed, .badCertificate, .badCertificateEnvironment,
        .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken,
        .badEnvironmentKeyIdInToken, .badPath, .methodNotAllowed, .expiredToken, .unregistered, .payloadTooLarge,
        .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError, .serviceUnavailable, .shutdown,
        .missingChannelId, .badChannelId, .channelNotRegistered, .cannotCreateChannelConfig, .featureNotEnabled,
    ]

    /// The reason for a `reason` string, exactly as APNs spells it; anything else is `.unknown`.
    public init(_ reason: String) {
        switch reason {
        case "BadCollapseId": self = .badCollapseId
        case "BadDeviceToken": self = .badDeviceToken
        case "BadExpirationDate": self = .badExpirationDate
        case "BadMessageId": self = .badMessageId
        case "BadPriority": self = .badPriority
        case "BadTopic": self = .badTopic
        case "DeviceTokenNotForTopic": self = .deviceTokenNotForTopic
        case "DuplicateHeaders": self = .duplicateHeaders
        case "IdleTimeout": self = .idleTimeout
        case "InvalidPushType": self = .invalidPushType
        case "MissingDeviceToken": self = .missingDeviceToken
        case "MissingTopic": self = .missingTopic
        case "PayloadEmpty": self = .payloadEmpty
        case "TopicDisallowed": self = .topicDisallowed
        case "BadCertificate": self = .badCertificate
        case "BadCertificateEnvironment": self = .badCertificateEnvironment
        case "ExpiredProviderToken": self = .expiredProviderToken
        case "Forbidden": self = .forbidden
        case "InvalidProviderToken": self = .invalidProviderToken
        case "MissingProviderToken": self = .missingProviderToken
        case "UnrelatedKeyIdInToken": self = .unrelatedKeyIdInToken
        case "BadEnvironmentKeyIdInToken": self = .badEnvironmentKeyIdInToken
        case "BadPath": self = .badPath
        case "MethodNotAllowed": self = .methodNotAllowed
        case "ExpiredToken": self = .expiredToken
        case "Unregistered": self = .unregistered
        case "PayloadTooLarge": self = .payloadTooLarge
        case "TooManyProviderTokenUpdates": self = .tooManyProviderTokenUpdates
        case "TooManyRequests": self = .tooManyRequests
        case "InternalServerError": self = .internalServerError
        case "ServiceUnavailable": self = .serviceUnavailable
        case "Shutdown": self = .shutdown
        case "MissingChannelId": self = .missingChannelId
        case "BadChannelId": self = .badChannelId
        case "ChannelNotRegistered": self = .channelNotRegistered
        case "CannotCreateChannelConfig": self = .cannotCreateChannelConfig
        case "FeatureNotEnabled": self = .featureNotEnabled
        default: self = .unknown(reason)
        }
    }

    /// The string APNs sends.
    public var rawValue: String {
        switch self {
        case .badCollapseId: return "BadCollapseId"
        case .badDeviceToken: return "BadDeviceToken"
        case .badExpirationDate: return "BadExpirationDate"
        case .badMessageId: return "BadMessageId"
        case .badPriority: return "BadPriority"
        case .badTopic: return "BadTopic"
        case .deviceTokenNotForTopic: return "DeviceTokenNotForTopic"
        case .duplicateHeaders: return "DuplicateHeaders"
        case .idleTimeout: return "IdleTimeout"
        case .invalidPushType: return "InvalidPushType"
        case .missingDeviceToken: return "MissingDeviceToken"
        case .missingTopic: return "MissingTopic"
        case .payloadEmpty: return "PayloadEmpty"
        case .topicDisallowed: return "TopicDisallowed"
        case .badCertificate: return "BadCertificate"
        case .badCertificateEnvironment: return "BadCertificateEnvironment"
        case .expiredProviderToken: return "ExpiredProviderToken"
        case .forbidden: return "Forbidden"
        case .invalidProviderToken: return "InvalidProviderToken"
        case .missingProviderToken: return "MissingProviderToken"
        case .unrelatedKeyIdInToken: return "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIdInToken: return "BadEnvironmentKeyIdInToken"
        case .badPath: return "BadPath"
        case .methodNotAllowed: return "MethodNotAllowed"
        case .expiredToken: return "ExpiredToken"
        case .unregistered: return "Unregistered"
        case .payloadTooLarge: return "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: return "TooManyProviderTokenUpdates"
        case .tooManyRequests: return "TooManyRequests"
        case .internalServerError: return "InternalServerError"
        case .serviceUnavailable: return "ServiceUnavailable"
        case .shutdown: return "Shutdown"
        case .missingChannelId: return "MissingChannelId"
        case .badChannelId: return "BadChannelId"
        case .channelNotRegistered: return "ChannelNotRegistered"
        case .cannotCreateChannelConfig: return "CannotCreateChannelConfig"
        case .featureNotEnabled: return "FeatureNotEnabled"
        case .unknown(let reason): return reason
        }
    }

    public var description: String { rawValue }

    /// The HTTP status APNs sends with this reason; nil for `.unknown`.
    public var httpStatus: Int? {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed, .missingChannelId, .badChannelId, .channelNotRegistered,
            .cannotCreateChannelConfig, .featureNotEnabled:
            return 400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
            .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken:
            return 403
        case .badPath: return 404
        case .methodNotAllowed: return 405
        case .expiredToken, .unregistered: return 410
        case .payloadTooLarge: return 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: return 429
        case .internalServerError: return 500
        case .serviceUnavailable, .shutdown: return 503
        case .unknown: return nil
        }
    }

    /// What to do about a known reason; nil for `.unknown` (see `reasonClass(status:)`).
    public var knownClass: APNsReasonClass? {
        switch self {
        case .badDeviceToken, .deviceTokenNotForTopic, .expiredToken, .unregistered:
            return .invalidToken
        case .idleTimeout, .unrelatedKeyIdInToken, .shutdown:
            return .retryOnNewConnection
        case .expiredProviderToken:
            return .refreshProviderToken
        case .badCertificate, .badCertificateEnvironment, .invalidProviderToken, .missingProviderToken,
            .badEnvironmentKeyIdInToken:
            return .badCredential
        case .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError, .serviceUnavailable:
            return .retryWithBackoff
        case .badCollapseId, .badExpirationDate, .badMessageId, .badPriority, .badTopic, .duplicateHeaders,
            .invalidPushType, .missingDeviceToken, .missingTopic, .payloadEmpty, .topicDisallowed, .forbidden,
            .badPath, .methodNotAllowed, .payloadTooLarge:
            return .permanent
        // A channel that is gone is not a dead device token: the outcome reports it, nothing is invalidated.
        case .missingChannelId, .badChannelId, .channelNotRegistered, .cannotCreateChannelConfig, .featureNotEnabled:
            return .permanent
        case .unknown:
            return nil
        }
    }

    /// What to do: the table's class for a known reason, else decided by the response's HTTP status.
    public func reasonClass(status: Int) -> APNsReasonClass {
        knownClass ?? APNsReasonClass(unknownReasonStatus: status)
    }

    /// True for the reasons that mean our request was malformed (a bug on this side, not bad data).
    public var isClientBug: Bool {
        switch self {
        case .badMessageId, .duplicateHeaders, .badPath, .methodNotAllowed, .missingDeviceToken, .payloadEmpty,
            .missingChannelId:
            return true
        default:
            return false
        }
    }
}
