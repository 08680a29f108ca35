// The events `apns-worker bench rules` evaluates: kept here, beside the pipeline's sample events, so
// that tests render the same ones.

/// Chat messages, a mention, a photo, a reaction, a Live Activity update, a story like and an event no
/// rule matches, two devices each; `occurred_at` is empty, for the bench to date them.
public enum RulesBenchEvents {
    static let devices = """
        [{"token": "8f3c2a1be4d5c6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1", "environment": "production"},
         {"token": "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9", "environment": "sandbox"}]
        """

    /// A mix of events hitting rules early, late and not at all.
    public static let all: [String] = [
        """
        {"id": "evt-1", "type": "chat.message", "occurred_at": "", "app": "com.example.chat",
         "recipient": {"user_id": "u1", "locale": "fr-CA"}, "devices": \(devices),
         "data": {"sender": {"name": "Ana Lima"}, "text": "Are we still on for lunch tomorrow? I booked the place \
        near the station.", "thread_id": "t7", "message_id": "m42", "unread_count": 3},
         "apns": {"priority": 5}}
        """,
        """
        {"id": "evt-2", "type": "chat.message", "occurred_at": "", "app": "com.example.chat",
         "recipient": {"user_id": "u2", "locale": "en-US"}, "devices": \(devices),
         "data": {"sender": {"name": "Bo"}, "text": "@you can you review this?", "thread_id": "t9",
                  "thread_title": "Design review", "message_id": "m43", "mentions_recipient": true}}
        """,
        """
        {"id": "evt-3", "type": "chat.message", "occurred_at": "", "app": "com.example.chat",
         "recipient": {"user_id": "u3", "locale": "ja-JP"}, "devices": \(devices),
         "data": {"sender": {"name": "佐藤"}, "thread_id": "t1", "message_id": "m44",
                  "attachment": {"kind": "photo", "url": "https://cdn.example.com/p/1.jpg"}}}
        """,
        """
        {"id": "evt-4", "type": "chat.reaction", "occurred_at": "", "app": "com.example.chat",
         "recipient": {"user_id": "u4", "locale": "de"}, "devices": \(devices),
         "data": {"sender": {"name": "Kai"}, "emoji": "👍", "thread_id": "t2", "message_id": "m9"}}
        """,
        """
        {"id": "evt-5", "type": "order.delivery_update", "occurred_at": "", "app": "com.example.shop",
         "recipient": {"user_id": "u5", "locale": "en"}, "devices": \(devices),
         "data": {"order": {"number": "A-1001"}, "status": "out_for_delivery", "eta": "2026-11-29T13:15:00Z",
                  "stops_away": 3}}
        """,
        """
        {"id": "evt-6", "type": "social.story_liked", "occurred_at": "", "app": "com.example.social",
         "recipient": {"user_id": "u6", "locale": "fr"}, "devices": \(devices),
         "data": {"actor": {"name": "Léa"}, "like_count": 24, "story_id": "s5"}}
        """,
        """
        {"id": "evt-7", "type": "user.profile_viewed", "occurred_at": "", "app": "com.example.social",
         "recipient": {"user_id": "u7"}, "devices": \(devices), "data": {}}
        """,
    ]
}
