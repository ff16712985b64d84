import Foundation
import DataStack

/// `datastack history FILE [--after TRANSACTION] [--json] [--model PATH]`:
/// the store's persistent history, transaction by transaction with its changes.
struct HistoryCommand: ToolCommand {
    let file: URL
    let json: Bool
    let modelPath: String?
    /// Only transactions after this number (`ATRANSACTION.Z_PK`); nil for all.
    let after: Int64?

    init(_ arguments: [String]) throws {
        let parsed = try Arguments(arguments, flags: ["--json"], options: ["--model", "--after"])
        file = storeURL(try parsed.file())
        json = parsed.flags.contains("--json")
        modelPath = parsed.values["--model"]
        if let text = parsed.values["--after"] {
            guard let number = Int64(text), number >= 0 else {
                throw ToolError.usage("--after takes a transaction number (a token's transactionNumber), not '\(text)'")
            }
            after = number
        } else {
            after = nil
        }
    }

    func run() throws {
        let opened = try OpenedStore(file, modelPath: modelPath, tracksHistory: true)
        let token = after.map { PersistentHistoryToken(storeIdentifier: opened.store.identifier, transactionNumber: $0) }
        try HistoryPages(coordinator: opened.coordinator, includesChanges: true).forEach(after: token) { transaction in
            if json {
                Output.standard.write(try JSONText.line(Self.json(transaction)))
            } else {
                Self.writeText(transaction)
            }
        }
    }

    /// One JSON Lines record: the transaction and its changes.
    static func json(_ transaction: PersistentHistoryTransaction) -> [String: Any] {
        [
            "transaction": Int(transaction.transactionNumber),
            "storeIdentifier": transaction.storeIdentifier,
            "timestamp": ValueFormat.date(transaction.timestamp),
            "author": transaction.author.map { $0 as Any } ?? NSNull(),
            "contextName": transaction.contextName.map { $0 as Any } ?? NSNull(),
            "processID": transaction.processID,
            "bundleID": transaction.bundleID,
            "changes": (transaction.changes ?? []).map { change -> [String: Any] in
                [
                    "change": Int(change.changeID),
                    "type": name(of: change.changeType),
                    "entity": change.changedObjectID.entityName,
                    "object": change.changedObjectID.uriRepresentation().absoluteString,
                    "updatedProperties": change.updatedProperties.map { $0.sorted() as Any } ?? NSNull(),
                    "tombstone": change.tombstone.map { $0.mapValues(ValueFormat.json) as Any } ?? NSNull(),
                ]
            },
        ]
    }

    private static func writeText(_ transaction: PersistentHistoryTransaction) {
        var header = "transaction \(transaction.transactionNumber)  \(ValueFormat.date(transaction.timestamp))"
        if let author = transaction.author { header += "  author \(ValueFormat.quoted(author))" }
        if let context = transaction.contextName { header += "  context \(ValueFormat.quoted(context))" }
        header += "  process \(ValueFormat.quoted(transaction.processID))"
        Output.standard.write(header)
        let rows = (transaction.changes ?? []).map { change -> [String] in
            var detail = ""
            if let updated = change.updatedProperties { detail = updated.sorted().joined(separator: ", ") }
            if let tombstone = change.tombstone {
                detail = "tombstone {" + tombstone.keys.sorted().map { "\($0): \(ValueFormat.text(tombstone[$0] ?? .null))" }
                    .joined(separator: ", ") + "}"
            }
            return [name(of: change.changeType), ValueFormat.text(change.changedObjectID), detail]
        }
        TextTable.lines(rows, indent: "  ").forEach { Output.standard.write($0) }
    }

    static func name(of type: PersistentHistoryChange.ChangeType) -> String {
        switch type {
        case .insert: "insert"
        case .update: "update"
        case .delete: "delete"
        }
    }
}
