// What can be wrong with an APNs request, named by the field at fault and said so a person can fix it.

/// One thing wrong with an APNs request: which field, what was wrong, and what would be right.
///
/// Thrown by the checking initialisers (`DeviceToken.init(_:)`, `APNsPriority.init(_:)`, ...) and
/// collected by `APNsRequest.validate()`, which reports every problem at once. Comparing two values
/// compares their codes only, as with other errors in this project.
public struct APNsRequestError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem, stable for tests and metrics; the message carries the details.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case deviceTokenEmpty, deviceTokenOddLength, deviceTokenNotHex, deviceTokenTooShort, deviceTokenTooLong
            case environmentUnknown, pushTypeUnknown
            case priorityInvalid, priorityNotAllowed
            case expirationInvalid
            case collapseIDEmpty, collapseIDTooLong, collapseIDInvalidCharacter
            case apnsIDInvalid
            case topicEmpty, topicInvalid, topicSuffixMismatch
            case payloadInvalidJSON, payloadNotObject, payloadMissingAPS, payloadTooLarge
            case payloadUnknownAPSKey, payloadKeyNotAllowed, payloadMissingKey
            case payloadWrongType, payloadValueOutOfRange
            case channelIDInvalid, channelPushTypeNotAllowed
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        public var description: String { base.rawValue }

        /// The device token was empty (or only whitespace and brackets).
        public static let deviceTokenEmpty = Code(.deviceTokenEmpty)
        /// The device token had an odd number of hex digits, so it cannot be whole bytes.
        public static let deviceTokenOddLength = Code(.deviceTokenOddLength)
        /// The device token held a character that is not a hex digit.
        public static let deviceTokenNotHex = Code(.deviceTokenNotHex)
        /// The device token was shorter than `DeviceToken.byteCountRange` allows.
        public static let deviceTokenTooShort = Code(.deviceTokenTooShort)
        /// The device token was longer than `DeviceToken.byteCountRange` allows.
        public static let deviceTokenTooLong = Code(.deviceTokenTooLong)
        /// The environment was none of sandbox, development, production.
        public static let environmentUnknown = Code(.environmentUnknown)
        /// The push type was not one APNs knows.
        public static let pushTypeUnknown = Code(.pushTypeUnknown)
        /// The priority was not 10, 5 or 1.
        public static let priorityInvalid = Code(.priorityInvalid)
        /// The priority is valid in general but not for this push type (background must be 5).
        public static let priorityNotAllowed = Code(.priorityNotAllowed)
        /// The expiration was not a non-negative whole number of UNIX seconds.
        public static let expirationInvalid = Code(.expirationInvalid)
        /// The collapse id was empty.
        public static let collapseIDEmpty = Code(.collapseIDEmpty)
        /// The collapse id was over 64 bytes of UTF-8.
        public static let collapseIDTooLong = Code(.collapseIDTooLong)
        /// The collapse id held a control character, which cannot go into an HTTP header.
        public static let collapseIDInvalidCharacter = Code(.collapseIDInvalidCharacter)
        /// The apns-id was not a UUID.
        public static let apnsIDInvalid = Code(.apnsIDInvalid)
        /// The topic was empty.
        public static let topicEmpty = Code(.topicEmpty)
        /// The topic held characters a bundle id cannot have.
        public static let topicInvalid = Code(.topicInvalid)
        /// The topic does not carry the suffix the push type needs (or carries another type's suffix).
        public static let topicSuffixMismatch = Code(.topicSuffixMismatch)
        /// The payload text was not JSON.
        public static let payloadInvalidJSON = Code(.payloadInvalidJSON)
        /// The payload was JSON but not an object.
        public static let payloadNotObject = Code(.payloadNotObject)
        /// The payload had no `aps` dictionary where the push type needs one.
        public static let payloadMissingAPS = Code(.payloadMissingAPS)
        /// The compact payload is over the push type's byte limit.
        public static let payloadTooLarge = Code(.payloadTooLarge)
        /// A key inside `aps` that APNs does not define: custom data belongs beside `aps`.
        public static let payloadUnknownAPSKey = Code(.payloadUnknownAPSKey)
        /// An `aps` key APNs defines but this push type forbids (alert in a background push).
        public static let payloadKeyNotAllowed = Code(.payloadKeyNotAllowed)
        /// A key the push type requires is missing (`content-available`, Live Activity `event`).
        public static let payloadMissingKey = Code(.payloadMissingKey)
        /// An `aps` value of the wrong JSON type (badge as a string).
        public static let payloadWrongType = Code(.payloadWrongType)
        /// An `aps` value of the right type but outside its range (volume 2, event "stop").
        public static let payloadValueOutOfRange = Code(.payloadValueOutOfRange)
        /// The broadcast channel id was empty or not base64.
        public static let channelIDInvalid = Code(.channelIDInvalid)
        /// A broadcast on a channel with a push type other than liveactivity.
        public static let channelPushTypeNotAllowed = Code(.channelPushTypeNotAllowed)
    }

    /// The kind of problem.
    public var code: Code
    /// The field at fault, named as on the wire: `device-token`, `apns-priority`, `payload.aps.badge`.
    public var field: String
    /// What was wrong and what would be right, for a person.
    public var message: String

    /// A problem with `field`; `message` says what was wrong and what would be right.
    public init(_ code: Code, field: String, _ message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    /// `field: message`, the form the command line prints.
    public var description: String { "\(field): \(message)" }

    public static func == (lhs: APNsRequestError, rhs: APNsRequestError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// One problem `APNsRequest.validate()` found; the same value a checking initialiser throws.
public typealias APNsRequestProblem = APNsRequestError

/// A request that cannot be sent, with every problem found in it.
public struct APNsInvalidRequest: Error, Sendable, CustomStringConvertible {
    /// Never empty.
    public var problems: [APNsRequestProblem]

    public init(problems: [APNsRequestProblem]) { self.problems = problems }

    /// One problem per line, `field: message`.
    public var description: String { problems.map(\.description).joined(separator: "\n") }
}
