import DataStackSync
import Foundation

// MARK: - The sync peer's lines

/// An edit a `datastack-sync-peer` saved (SyncPeerOutput.Edit in the peer).
struct SyncPeerEdit: Decodable, Hashable {
    var edit: Int
    var op: String
    var entity: String
    var object: String
    var field: String?
    var value: String?
}

/// One object of a peer's dump (SyncPeerOutput.Object in the peer).
struct SyncPeerObject: Codable, Hashable, CustomStringConvertible {
    var entity: String
    var key: String
    var values: [String: String]
    var members: [String: [String]]

    var description: String {
        "\(entity) \(key) \(values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")) "
            + members.sorted { $0.key < $1.key }.map { "\($0.key)=[\($0.value.joined(separator: ","))]" }.joined(separator: " ")
    }
}

/// A sync line of a peer (SyncPeerOutput.Synced in the peer).
struct SyncPeerSynced: Decodable, Hashable {
    var sync: String
    var error: String?
}

// MARK: - The oracle

/// What the hub's log says every replica must hold, and whether each peer's
/// logged edits are accounted for by it.
///
/// The rules are the declared ones of the peer's model (every property
/// `lastWriterWins`, every entity `deleteWins`): an object exists when the
/// hub has its insert and no delete of it; each attribute and to-one holds
/// the value of the change with the greatest hybrid timestamp that set it (a
/// to-one to a deleted object is empty); each to-many member is present when
/// its add or remove with the greatest timestamp is an add and neither object
/// is deleted. The inverse to-manys (`Tag.companies`, `Company.staff`)
/// follow from the sides that travel.
struct SyncConvergenceOracle {
    let log: [SequencedChange]
    /// Each object's entity and key (from its insert).
    private(set) var keys: [UUID: (entity: String, key: String)] = [:]
    private(set) var ids: [String: UUID] = [:]
    private(set) var deleted: Set<UUID> = []

    init(log: [SequencedChange]) {
        self.log = log
        for sequenced in log {
            let change = sequenced.change
            if change.kind == .delete { deleted.insert(change.objectID) }
            if case .string(let key)? = change.values["key"] {
                keys[change.objectID] = (change.entity, key)
                ids[key] = change.objectID
            }
        }
    }

    /// The state every replica must hold, sorted as a dump is.
    func expectedObjects() -> [SyncPeerObject] {
        var valueWinners: [UUID: [String: (HybridTimestamp, SyncValue)]] = [:]
        var memberWinners: [UUID: [String: [UUID: (HybridTimestamp, Bool)]]] = [:]
        for sequenced in log {
            let change = sequenced.change
            let time = change.timestamp
            for (field, value) in change.values where field != "key" {
                if let known = valueWinners[change.objectID]?[field], known.0 >= time { continue }
                valueWinners[change.objectID, default: [:]][field] = (time, value)
            }
            for (isAdd, fields) in [(true, change.added), (false, change.removed)] {
                for (field, members) in fields {
                    for member in members {
                        if let known = memberWinners[change.objectID]?[field]?[member], known.0 >= time { continue }
                        memberWinners[change.objectID, default: [:]][field, default: [:]][member] = (time, isAdd)
                    }
                }
            }
        }
        var objects: [UUID: SyncPeerObject] = [:]
        for (id, named) in keys where !deleted.contains(id) {
            var object = SyncPeerObject(entity: named.entity, key: named.key, values: [:], members: [:])
            switch named.entity {
            case "Company": object.members = ["tags": [], "staff": []]
            case "Tag": object.members = ["companies": []]
            default: break
            }
            for (field, (_, value)) in valueWinners[id] ?? [:] {
                if let text = render(value) { object.values[field] = text }
            }
            for (field, members) in memberWinners[id] ?? [:] {
                object.members[field] = members.filter { $0.value.1 && !deleted.contains($0.key) }
                    .compactMap { keys[$0.key]?.key ?? "?\($0.key)" }.sorted()
            }
            objects[id] = object
        }
        // The inverse sides.
        let byKey = Dictionary(uniqueKeysWithValues: objects.map { ($0.value.key, $0.key) })
        for (_, object) in objects {
            if object.entity == "Company" {
                for tag in object.members["tags"] ?? [] {
                    if let tagID = byKey[tag] { objects[tagID]?.members["companies", default: []].append(object.key) }
                }
            }
            if object.entity == "Person", let employer = object.values["employer"], let companyID = byKey[employer] {
                objects[companyID]?.members["staff", default: []].append(object.key)
            }
        }
        return objects.values.map { object in
            var sorted = object
            sorted.members = sorted.members.mapValues { $0.sorted() }
            return sorted
        }.sorted { ($0.entity, $0.key) < ($1.entity, $1.key) }
    }

    /// The hub's changes of the object `key` names and of the objects its
    /// changes point to, one line each, for a failure's message.
    func history(of key: String) -> [String] {
        guard let id = ids[key] else { return ["\(key): not on the hub"] }
        var related: Set<UUID> = [id]
        for sequenced in log where sequenced.change.objectID == id {
            for value in sequenced.change.values.values { if case .object(let other) = value { related.insert(other) } }
        }
        return log.filter { related.contains($0.change.objectID) }.map { sequenced in
            let change = sequenced.change
            let values = change.values.sorted { $0.key < $1.key }.map { "\($0.key)=\(render($0.value) ?? "nil")" }
            return "#\(sequenced.sequence) \(change.timestamp) \(change.kind) \(keys[change.objectID]?.key ?? "\(change.objectID)") "
                + values.joined(separator: " ")
        }
    }

    /// A value as a dump writes it; nil for none (and for a to-one to a deleted object).
    func render(_ value: SyncValue) -> String? {
        switch value {
        case .null: nil
        case .string(let text): text
        case .integer(let number): String(number)
        case .object(let id): deleted.contains(id) ? nil : keys[id]?.key ?? "?\(id)"
        default: "\(value)"
        }
    }

    /// The logged edits of the peer whose replica is `replica` that the hub's
    /// log does not account for, as messages. An edit is accounted for when the
    /// hub holds it, or a later edit of the same peer overwrote it before it
    /// was scanned (a scan records the object's values at the time: between
    /// two syncs only the last value of a field leaves the replica), or the
    /// peer deleted the object (or a to-one's destination, a member) later.
    func unaccounted(_ edits: [SyncPeerEdit], replica: UUID?, peer: String) -> [String] {
        var setValues: [UUID: [String: Set<String>]] = [:]
        var added: [UUID: [String: Set<UUID>]] = [:]
        var removed: [UUID: [String: Set<UUID>]] = [:]
        var addedByReplica: [UUID: [String: Set<UUID>]] = [:]
        for sequenced in log {
            let change = sequenced.change
            for (field, value) in change.values {
                setValues[change.objectID, default: [:]][field, default: []].insert(
                    value == .null ? "nil" : { if case .object(let id) = value { return keys[id]?.key ?? "?" } else { return render(value) ?? "nil" } }())
            }
            for (field, members) in change.added {
                added[change.objectID, default: [:]][field, default: []].formUnion(members)
                if change.replica == replica { addedByReplica[change.objectID, default: [:]][field, default: []].formUnion(members) }
            }
            for (field, members) in change.removed { removed[change.objectID, default: [:]][field, default: []].formUnion(members) }
        }
        var problems: [String] = []
        for (index, edit) in edits.enumerated() {
            let later = edits[(index + 1)...]
            func deletedLater(_ key: String?) -> Bool {
                guard let key else { return false }
                return later.contains { $0.op == "delete" && $0.object == key }
            }
            let overwritten = later.contains { other in
                other.object == edit.object && other.field != nil && other.field == edit.field
                    && (edit.op == "set" ? other.op == "set" : other.op != "set" && other.value == edit.value)
            }
            if deletedLater(edit.object) { continue }
            let id = ids[edit.object]
            let accounted: Bool
            switch edit.op {
            case "insert":
                accounted = id != nil
            case "set":
                guard let id, let field = edit.field else { accounted = false; break }
                accounted = overwritten || setValues[id]?[field]?.contains(edit.value ?? "nil") == true
                    || (field == "employer" && deletedLater(edit.value))
            case "add", "remove":
                guard let id, let field = edit.field, let value = edit.value else { accounted = false; break }
                if overwritten || deletedLater(value) { accounted = true; break }
                guard let member = ids[value] else { accounted = false; break }
                if edit.op == "add" {
                    accounted = added[id]?[field]?.contains(member) == true
                } else {
                    // A remove of a member the replica added and never pushed cancels that add locally:
                    // nothing of either leaves the replica.
                    accounted = removed[id]?[field]?.contains(member) == true
                        || addedByReplica[id]?[field]?.contains(member) != true
                }
            case "delete":
                accounted = id.map(deleted.contains) ?? true   // never synced: inserted and deleted between two syncs
            default:
                accounted = false
            }
            if !accounted {
                problems.append("\(peer) edit \(edit.edit) \(edit.op) \(edit.entity) \(edit.object) \(edit.field ?? "") \(edit.value ?? "") is not in the hub's log")
            }
        }
        return problems
    }
}
