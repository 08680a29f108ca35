// examples/rules.yaml, embedded so that `apns-worker dev` runs from the binary alone.
// A test checks it matches the file byte for byte; after editing the example, copy it here.

/// The example rules users copy (examples/rules.yaml).
public let embeddedExampleRules = #"""
# Example rules for apns-worker: which events become which notifications.
# Copy this file beside your Helm values and adapt it; check it with
#   apns-worker rules check --rules rules.yaml
# and try an event with
#   apns-worker rules render --rules rules.yaml --event event.json
#   apns-worker rules explain --rules rules.yaml --event event.json
#
# Rules are tried in order; the first that matches decides, unless it says `continue: true`.
# An event no rule matches gets the outcome `skipped` with reason `no_rule`.
# Templates read the event ({{ event.data.text }}), the device ({{ device.environment }}) and the
# recipient's locale ({{ locale }}); a missing value is an error unless `| default(...)` gives one.
version: 1

defaults:
  app: "{{ event.app }}"          # the bundle id; the push type's topic suffix is added for you
  push_type: alert
  priority: 10
  ttl: 1d                          # apns-expiration = the event's occurred_at + 1 day
  sound: default

localization:
  default_locale: en
  tables:
    en:
      chat.photo: "{{ event.data.sender.name }} sent a photo"
      chat.reaction: "{{ event.data.sender.name }} reacted {{ event.data.emoji }} to your message"
      call.missed: "Missed call from {{ event.data.caller.name }}"
      order.shipped.title: "Your order is on its way"
      order.shipped.body: "Order {{ event.data.order.number }} will arrive {{ event.data.order.eta_text }}."
      security.login.title: "New sign-in"
      security.login.body: "Your account was used to sign in on {{ event.data.device_name }}."
      likes.many: "{{ event.data.actor.name }} and {{ event.data.like_count }} others liked your story"
      digest.title: "Your week"
    fr:
      chat.photo: "{{ event.data.sender.name }} a envoyé une photo"
      chat.reaction: "{{ event.data.sender.name }} a réagi {{ event.data.emoji }} à votre message"
      call.missed: "Appel manqué de {{ event.data.caller.name }}"
      order.shipped.title: "Votre commande est en route"
      order.shipped.body: "La commande {{ event.data.order.number }} arrivera {{ event.data.order.eta_text }}."
      security.login.title: "Nouvelle connexion"
      security.login.body: "Votre compte a été utilisé pour se connecter sur {{ event.data.device_name }}."
      likes.many: "{{ event.data.actor.name }} et {{ event.data.like_count }} autres ont aimé votre story"
      digest.title: "Votre semaine"
    fr-CA:
      digest.title: "Votre semaine en bref"
    de:
      chat.photo: "{{ event.data.sender.name }} hat ein Foto gesendet"
      call.missed: "Verpasster Anruf von {{ event.data.caller.name }}"
      order.shipped.title: "Deine Bestellung ist unterwegs"
      security.login.title: "Neue Anmeldung"
    ja:
      chat.photo: "{{ event.data.sender.name }}さんが写真を送信しました"
      call.missed: "{{ event.data.caller.name }}さんからの不在着信"

rules:
  # --- Things we never notify about -------------------------------------------------------------
  - id: muted-thread
    description: The recipient muted this conversation.
    match:
      type: [{prefix: "chat."}]
      data: {thread_muted: true}
    skip: the recipient muted the thread

  - id: do-not-disturb-marketing
    match:
      type: [{prefix: "marketing."}]
      recipient: {marketing_opt_in: [false, {exists: false}]}
    skip: the recipient did not opt in to marketing

  # --- Chat ---------------------------------------------------------------------------------------
  - id: chat-mention
    description: Someone mentioned the recipient; more urgent than a plain message.
    match:
      type: [chat.message]
      data: {mentions_recipient: true}
    alert:
      title: "{{ event.data.sender.name | truncate(40) }} mentioned you"
      subtitle: "{{ event.data.thread_title | default(null) }}"
      body: "{{ event.data.text }}"
    thread_id: "{{ event.data.thread_id }}"
    category: MESSAGE
    interruption_level: time-sensitive
    mutable_content: true
    collapse_id: "{{ event.id }}"        # a redelivered event replaces, not duplicates
    badge: "{{ event.data.unread_count | default(1) }}"
    custom:
      thread: "{{ event.data.thread_id }}"
      message_id: "{{ event.data.message_id }}"
    accept_overrides: [badge, sound]

  - id: chat-photo
    match:
      type: chat.message
      data:
        attachment: {kind: [photo, {equals-ignore-case: IMAGE}]}
    alert:
      title: "{{ event.data.sender.name | truncate(40) }}"
      body: "{{ 'chat.photo' | t }}"
    thread_id: "{{ event.data.thread_id }}"
    category: MESSAGE
    mutable_content: true
    collapse_id: "{{ event.id }}"
    badge: "{{ event.data.unread_count | default(1) }}"
    custom:
      thread: "{{ event.data.thread_id }}"
      image_url: "{{ event.data.attachment.url }}"

  - id: chat-message
    match:
      type: chat.message
      data:
        conversation_kind: [{anything-but: [channel, broadcast]}, {exists: false}]
    alert:
      title: "{{ event.data.sender.name | truncate(40) }}"
      body: "{{ event.data.text }}"
    thread_id: "{{ event.data.thread_id }}"
    category: MESSAGE
    mutable_content: true
    collapse_id: "{{ event.id }}"
    badge: "{{ event.data.unread_count | default(1) }}"
    custom:
      thread: "{{ event.data.thread_id }}"
      message_id: "{{ event.data.message_id }}"
    accept_overrides: [priority, badge, sound]
    shorten: alert.body

  - id: chat-channel-message
    match:
      type: chat.message
      data: {conversation_kind: [channel, broadcast]}
    priority: 5
    alert:
      title: "#{{ event.data.channel.name }}"
      subtitle: "{{ event.data.sender.name }}"
      body: "{{ event.data.text }}"
    thread_id: "{{ event.data.thread_id }}"
    interruption_level: passive
    relevance_score: 0.3
    collapse_id: "{{ event.id }}"
    custom:
      thread: "{{ event.data.thread_id }}"

  - id: chat-reaction
    match:
      type: chat.reaction
    priority: 5
    alert:
      body: "{{ 'chat.reaction' | t }}"
    thread_id: "{{ event.data.thread_id }}"
    interruption_level: passive
    sound: null
    collapse_id: "reaction-{{ event.data.message_id }}"

  - id: chat-read-sync
    description: Clears the badge on the user's other devices.
    match:
      type: chat.read
    push_type: background
    priority: 5
    custom:
      sync: read
      thread: "{{ event.data.thread_id }}"

  # --- Calls --------------------------------------------------------------------------------------
  - id: call-incoming
    match:
      type: call.incoming
    push_type: voip
    priority: 10
    ttl: 0                               # ring now or never
    custom:
      call_id: "{{ event.data.call_id }}"
      caller: "{{ event.data.caller }}"   # an object, kept as an object
      video: "{{ event.data.video | default(false) }}"

  - id: call-missed
    match:
      type: call.missed
    alert:
      body: "{{ 'call.missed' | t }}"
    category: CALL_BACK
    interruption_level: time-sensitive
    custom:
      call_id: "{{ event.data.call_id }}"

  # --- Orders and deliveries ----------------------------------------------------------------------
  - id: delivery-activity-start
    match:
      type: order.delivery_started
    push_type: liveactivity
    live_activity:
      event: start
      attributes_type: DeliveryAttributes
      attributes:
        order_number: "{{ event.data.order.number }}"
      content_state:
        status: "{{ event.data.status }}"
        eta: "{{ event.data.eta }}"
      stale_date: "{{ event.data.eta }}"
    alert:
      title: "{{ 'order.shipped.title' | t }}"
      body: "{{ 'order.shipped.body' | t }}"

  - id: delivery-activity-update
    match:
      type: order.delivery_update
      data: {status: [{anything-but: delivered}]}
    push_type: liveactivity
    priority: 5
    live_activity:
      event: update
      content_state:
        status: "{{ event.data.status }}"
        eta: "{{ event.data.eta }}"
        stops_away: "{{ event.data.stops_away | default(null) }}"
      stale_date: "{{ event.data.eta }}"

  - id: delivery-activity-end
    match:
      type: order.delivery_update
      data: {status: delivered}
    push_type: liveactivity
    live_activity:
      event: end
      content_state:
        status: delivered
      dismissal_date: "{{ event.data.delivered_at }}"
    alert:
      body: "Your order {{ event.data.order.number }} was delivered."

  - id: order-shipped
    match:
      type: order.shipped
    alert:
      title_loc_key: ORDER_SHIPPED_TITLE            # localized on the device
      loc_key: ORDER_SHIPPED_BODY
      loc_args: ["{{ event.data.order.number }}", "{{ event.data.carrier | upper }}"]
    category: ORDER
    thread_id: "order-{{ event.data.order.number }}"
    custom:
      order: "{{ event.data.order.number }}"

  - id: payment-failed
    match:
      type: billing.payment_failed
      data: {amount_cents: {numeric: [">", 0]}}
    alert:
      title: Payment failed
      body: "We could not charge {{ event.data.card.brand | upper }} •••• {{ event.data.card.last4 }}."
    interruption_level: time-sensitive
    category: BILLING

  # --- Account and security -----------------------------------------------------------------------
  - id: security-new-login
    match:
      type: [security.new_login, security.new_device]
    alert:
      title: "{{ 'security.login.title' | t }}"
      body: "{{ 'security.login.body' | t }}"
    interruption_level: time-sensitive
    relevance_score: 1.0
    ttl: 6h

  - id: security-password-changed
    match:
      type: security.password_changed
    alert:
      title: Password changed
      body: "Your password was changed {{ event.data.when_text | default('just now') }}."
    interruption_level: time-sensitive

  # --- Social -------------------------------------------------------------------------------------
  - id: friend-request
    match:
      type: social.friend_request
    alert:
      title: Friend request
      body: "{{ event.data.actor.name }} wants to connect"
    category: FRIEND_REQUEST
    thread_id: friend-requests
    custom:
      actor: "{{ event.data.actor.id }}"

  - id: story-likes-many
    match:
      type: social.story_liked
      data: {like_count: {numeric: [">=", 10]}}
    priority: 5
    alert:
      body: "{{ 'likes.many' | t }}"
    interruption_level: passive
    thread_id: "story-{{ event.data.story_id }}"
    collapse_id: "likes-{{ event.data.story_id }}"

  - id: story-liked
    match:
      type: social.story_liked
    priority: 5
    alert:
      body: "{{ event.data.actor.name }} liked your story"
    interruption_level: passive
    thread_id: "story-{{ event.data.story_id }}"
    collapse_id: "likes-{{ event.data.story_id }}"

  # --- Reminders ----------------------------------------------------------------------------------
  - id: calendar-reminder
    match:
      $or:
        - type: calendar.reminder
        - type: calendar.event_starting
          data: {minutes_before: {numeric: ["<=", 15]}}
    alert:
      title: "{{ event.data.title | truncate(60) }}"
      body: "{{ event.data.starts_text }}"
    category: CALENDAR
    interruption_level: time-sensitive
    ttl: 30m

  - id: emergency-broadcast
    match:
      type: safety.emergency
      app: [{suffix: ".safety"}]
    alert:
      title: "{{ event.data.headline }}"
      body: "{{ event.data.instructions }}"
    sound: {critical: true, name: default, volume: 1.0}
    interruption_level: critical
    ttl: 0

  # --- Marketing and digests ----------------------------------------------------------------------
  - id: weekly-digest
    match:
      type: [marketing.weekly_digest]
    priority: 5
    alert:
      title: "{{ 'digest.title' | t }}"
      body: "{{ event.data.highlights | join(' · ') | truncate(180) }}"
    interruption_level: passive
    relevance_score: 0.2
    sound: null
    ttl: 2d

  # --- Silent updates -----------------------------------------------------------------------------
  - id: content-sync
    match:
      type: [{prefix: "sync."}]
    push_type: background
    priority: 5
    custom:
      sync: "{{ event.type }}"
      cursor: "{{ event.data.cursor | default(null) }}"

  - id: widget-refresh
    match:
      type: widget.refresh
    push_type: widgets
    priority: 5

"""#
