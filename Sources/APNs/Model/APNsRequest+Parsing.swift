// Building a request from unchecked text (a command line, a rules template), reporting every
// problem at once instead of stopping at the first, so the person fixes them all in one go.

public import JSON

extension APNsRequest {
    /// Builds a request from text fields, or throws every problem found.
    ///
    /// - Parameters:
    ///   - deviceToken: hex, in any of the shapes `DeviceToken.init(_:)` normalises.
    ///   - environment: sandbox, development or production; nil means production.
    ///   - bundleOrTopic: a bundle id, or a topic that already carries the push type's suffix
    ///     (see `PushType.topic(forBundle:)`).
    ///   - pushType: nil means alert.
    ///   - priority: 10, 5 or 1; nil means the push type's default.
    ///   - expiration: 0 or UNIX seconds; nil leaves the header out.
    ///   - collapseID: nil leaves the header out.
    ///   - apnsID: a UUID; nil means a fresh random one.
    public static func parse(
        deviceToken: String, environment: String? = nil, bundleOrTopic: String, pushType: String? = nil,
        priority: String? = nil, expiration: String? = nil, collapseID: String? = nil, apnsID: String? = nil,
        payload: JSONValue
    ) throws(APNsInvalidRequest) -> APNsRequest {
        try build(
            deviceToken: deviceToken, environment: environment, bundleOrTopic: bundleOrTopic, pushType: pushType,
            priority: priority, expiration: expiration, collapseID: collapseID, apnsID: apnsID,
            payload: .success(payload))
    }

    /// As `parse(...payload:)`, with the payload as JSON text; text that is not JSON is one more
    /// problem, reported with its line and column.
    public static func parse(
        deviceToken: String, environment: String? = nil, bundleOrTopic: String, pushType: String? = nil,
        priority: String? = nil, expiration: String? = nil, collapseID: String? = nil, apnsID: String? = nil,
        payloadJSON: some Collection<UInt8>
    ) throws(APNsInvalidRequest) -> APNsRequest {
        let payload: Result<JSONValue, APNsRequestProblem>
        do {
            payload = .success(try JSONValue(parsing: payloadJSON))
        } catch {
            payload = .failure(
                APNsRequestProblem(
                    .payloadInvalidJSON, field: "payload", "the payload is not valid JSON: \(error)"))
        }
        return try build(
            deviceToken: deviceToken, environment: environment, bundleOrTopic: bundleOrTopic, pushType: pushType,
            priority: priority, expiration: expiration, collapseID: collapseID, apnsID: apnsID, payload: payload)
    }

    private static func build(
        deviceToken: String, environment: String?, bundleOrTopic: String, pushType: String?,
        priority: String?, expiration: String?, collapseID: String?, apnsID: String?,
        payload: Result<JSONValue, APNsRequestProblem>
    ) throws(APNsInvalidRequest) -> APNsRequest {
        var problems: [APNsRequestProblem] = []
        var token: DeviceToken?
        do { token = try DeviceToken(deviceToken) } catch { problems.append(error) }
        var environmentValue = APNsEnvironment.production
        if let environment {
            do { environmentValue = try APNsEnvironment(parsing: environment) } catch { problems.append(error) }
        }
        var type: PushType? = .alert
        if let pushType {
            do { type = try PushType(parsing: pushType) } catch {
                type = nil
                problems.append(error)
            }
        }
        var priorityValue: APNsPriority?
        if let priority {
            do { priorityValue = try APNsPriority(parsing: priority) } catch { problems.append(error) }
        }
        var expirationValue = APNsExpiration.none
        if let expiration {
            do { expirationValue = try APNsExpiration(parsing: expiration) } catch { problems.append(error) }
        }
        var collapse: CollapseID?
        if let collapseID {
            do { collapse = try CollapseID(collapseID) } catch { problems.append(error) }
        }
        var id = APNsID.random()
        if let apnsID {
            do { id = try APNsID(parsing: apnsID) } catch { problems.append(error) }
        }
        var payloadValue: JSONValue?
        switch payload {
        case .success(let value): payloadValue = value
        case .failure(let problem): problems.append(problem)
        }

        // Checks that need several fields run even when others failed, with stand-ins for the
        // failed ones; a check about a failed field itself would only repeat its problem.
        if let type {
            let request = APNsRequest(
                deviceToken: token ?? DeviceToken(uncheckedHex: String(repeating: "0", count: 64)),
                environment: environmentValue, topic: type.topic(forBundle: bundleOrTopic), pushType: type,
                priority: priorityValue, expiration: expirationValue, collapseID: collapse, apnsID: id,
                payload: payloadValue ?? .object(JSONObject()))
            var found = request.validate()
            if priority != nil && priorityValue == nil { found.removeAll { $0.field == "apns-priority" } }
            if payloadValue == nil { found.removeAll { $0.field.hasPrefix("payload") } }
            problems += found
            if problems.isEmpty && token != nil { return request }
        }
        throw APNsInvalidRequest(problems: problems)
    }
}
