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

/// Reads a store's history a page of transactions at a time, so that memory
/// holds one page however long the history is: each page is a fetch after the
/// previous page's last token, with a fetch limit.
struct HistoryPages {
    let coordinator: PersistentStoreCoordinator
    let includesChanges: Bool
    var pageSize = 200

    /// Calls `body` with every transaction after `token` (all for nil), oldest first.
    ///
    /// - Throws: ``PersistentStoreError/Code/historyNotTracked`` when the store has no history tables.
    func forEach(after token: PersistentHistoryToken?, _ body: (PersistentHistoryTransaction) throws -> Void) throws {
        var after = token
        while true {
            var request = PersistentHistoryRequest.fetchHistory(after: after)
            request.fetchLimit = pageSize
            request.includesChanges = includesChanges
            let page = try coordinator.fetchHistory(request)
            for transaction in page { try body(transaction) }
            guard page.count == pageSize, let last = page.last else { return }
            after = last.token
        }
    }
}

/// How many transactions a store's history holds, and its first and last.
struct HistorySummary {
    let count: Int
    let first: PersistentHistoryTransaction?
    let last: PersistentHistoryTransaction?

    /// The summary, or nil when the store records no persistent history.
    init?(_ opened: OpenedStore) throws {
        var count = 0
        var first: PersistentHistoryTransaction?
        var last: PersistentHistoryTransaction?
        do {
            try HistoryPages(coordinator: opened.coordinator, includesChanges: false).forEach(after: nil) { transaction in
                count += 1
                if first == nil { first = transaction }
                last = transaction
            }
        } catch let error as PersistentStoreError where error.code == .historyNotTracked {
            return nil
        }
        self.count = count
        self.first = first
        self.last = last
    }

    var text: String {
        guard let first, let last else { return "\(count) transactions" }
        return "\(count) transactions, first \(first.transactionNumber) at \(ValueFormat.date(first.timestamp)), "
            + "last \(last.transactionNumber) at \(ValueFormat.date(last.timestamp))"
    }

    var json: [String: Any] {
        func point(_ transaction: PersistentHistoryTransaction?) -> Any {
            guard let transaction else { return NSNull() }
            return ["transaction": Int(transaction.transactionNumber), "timestamp": ValueFormat.date(transaction.timestamp)]
        }
        return ["transactions": count, "first": point(first), "last": point(last)]
    }
}
