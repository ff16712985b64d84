import DataStack
import DataStackPostgreSQL
import DataStackPostgreSQLSync
import DataStackSync
import Foundation
import Synchronization
import Testing

// MARK: - Helpers

/// A hub on a fresh database of the shared test server, and the database's URL.
private func makeHub() throws -> (PostgreSQLSyncHub, URL) {
    let url = try PostgreSQLTestServer.shared.get().makeDatabase()
    return (try PostgreSQLSyncHub(url: url), url)
}

/// An insert by `replica`, its local change number `local`.
private func change(_ replica: UUID, _ local: Int64, name: String = "item") -> SyncChange {
    SyncChange(
        objectID: UUID(), entity: "Item", kind: .insert,
        values: ["name": .string(name), "rank": .integer(local)],
        timestamp: HybridTimestamp(milliseconds: 1_790_000_000_000 + local, counter: 0, replica: replica),
        localSequence: local, baseSequence: 0)
}

/// Object numbers as a test declares them.
private struct Numbers: SyncObjectNumbering {
    var objects: [Int64: UUID]
    init(_ objects: [Int64: UUID]) { self.objects = objects }
    func number(of object: UUID) -> Int64? { objects.filter { $0.value == object }.keys.min() }
    func object(numbered number: Int64) -> UUID? { objects[number] }
}

/// The SyncError `body` throws; records an issue when it throws nothing or something else.
private func syncError<T>(_ body: () throws -> T, sourceLocation: SourceLocation = #_sourceLocation) -> SyncError? {
    do {
        _ = try body()
        Issue.record("expected a SyncError, nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as SyncError {
        return error
    } catch {
        Issue.record("expected a SyncError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// A call run on a thread of its own, so that a test can act while it blocks.
private final class BackgroundCall<T: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `result` is written before `done` is signalled and read after it is waited for.
    private var result: Result<T, any Error>?
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () throws -> T) {
        // A thread of its own, not the global queue (see BackgroundSave).
        Thread {
            self.result = Result { try body() }
            self.done.signal()
        }.start()
    }

    /// What the call returned or threw, or nil when it has not returned within `seconds`.
    func outcome(within seconds: Int) -> Result<T, any Error>? {
        done.wait(timeout: .now() + .seconds(seconds)) == .success ? result : nil
    }
}

extension PostgreSQLConnection {
    /// Waits, up to `seconds`, until the hub's listening session has looked at
    /// the last sequence and sits idle, waiting for notifications: from then on,
    /// a push can only reach it as a notification. Asked every 20 ms (PostgreSQL
    /// announces no such thing); false when the deadline passes first.
    fileprivate func waitUntilTheHubListens(within seconds: Int = 10) throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            let listening = try execute("""
                SELECT count(*) FROM pg_stat_activity
                WHERE application_name = $1 AND state = 'idle' AND query LIKE '%last_sequence%' AND datname = current_database()
                """, [.text(PostgreSQLSyncHub.listenerApplicationName)]).int64(row: 0, column: 0)
            if listening == 1 { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return false
    }
}

// MARK: - Tests

@Suite("PostgreSQLSyncHub")
struct PostgreSQLSyncHubTests {
    // MARK: Push and pull

    @Test func pushedChangesArePulledInOrderWithTheirContent() throws {
        let (hub, _) = try makeHub()
        let a = UUID(), b = UUID()
        let first = [change(a, 1), change(a, 2), change(a, 3)]
        let second = [change(b, 1, name: "naïve 日本語"), change(b, 2)]
        #expect(try hub.push(first) == [1, 2, 3])
        #expect(try hub.push(second) == [4, 5])
        #expect(try hub.push([]) == [])

        let all = try hub.pull(after: 0, limit: 100)
        #expect(all.map(\.sequence) == [1, 2, 3, 4, 5])
        #expect(all.map(\.change) == first + second)
        #expect(try hub.pull(after: 2, limit: 2).map(\.sequence) == [3, 4])
        #expect(try hub.pull(after: 5, limit: 100).isEmpty)
    }

    /// A replica that applied more than the hub ever gave (the hub's database
    /// restored from an older backup) would skip the changes the hub numbers
    /// again from there: it is told to start from a snapshot instead.
    @Test func aReplicaAheadOfTheHubIsToldToStartFromASnapshot() throws {
        let (hub, _) = try makeHub()
        _ = try hub.push([change(UUID(), 1), change(UUID(), 1)])
        let error = syncError { try hub.pull(after: 9, limit: 100) }
        #expect(error?.code == .snapshotRequired)
        #expect(error?.message.contains("through sequence 9") == true)
        #expect(error?.message.contains("only through 2") == true)
    }

    @Test func aChunkPushedAgainAppendsNothingAndReturnsItsFirstSequences() throws {
        let (hub, _) = try makeHub()
        let a = UUID()
        let chunk = [change(a, 1), change(a, 2)]
        #expect(try hub.push(chunk) == [1, 2])
        // As after a dropped link: the same chunk again, then with a new change after it.
        #expect(try hub.push(chunk) == [1, 2])
        #expect(try hub.push(chunk + [change(a, 3)]) == [1, 2, 3])
        // Twice in one push: kept once.
        let fourth = change(a, 4)
        #expect(try hub.push([fourth, fourth]) == [4, 4])
        #expect(try hub.pull(after: 0, limit: 100).map(\.sequence) == [1, 2, 3, 4])
        // After a restart the replica learns what the hub holds of it.
        #expect(try hub.register(replica: a, modelVersion: "v1").lastPushedLocalSequence == 4)
        #expect(try hub.push([change(a, 5)]) == [5])
        #expect(try hub.register(replica: a, modelVersion: "v1").lastPushedLocalSequence == 5)
    }

    // MARK: Chunk rows

    @Test func aPushIsOneChunkRowAndAPullFromItsMiddleDropsWhatCameBefore() throws {
        let (hub, url) = try makeHub()
        let a = UUID()
        let chunk = (1...5).map { change(a, Int64($0)) }
        #expect(try hub.push(chunk) == [1, 2, 3, 4, 5])
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        let row = try admin.execute("SELECT first_sequence, last_sequence, first_local, last_local FROM datastack_sync_chunk")
        #expect(row.rowCount == 1)
        #expect(try [0, 1, 2, 3].map { try row.int64(row: 0, column: $0) } == [1, 5, 1, 5])
        #expect(try hub.pull(after: 2, limit: 2).map(\.change) == Array(chunk[2...3]))
        #expect(try hub.pull(after: 4, limit: 10).map(\.sequence) == [5])
    }

    @Test func aPushPartlyHeldAppendsOnlyTheRestAndAnswersEverySequence() throws {
        let (hub, url) = try makeHub()
        let a = UUID(), b = UUID()
        let changes = (1...6).map { change(a, Int64($0)) }
        #expect(try hub.push(Array(changes[0...2])) == [1, 2, 3])
        #expect(try hub.push([change(b, 1)]) == [4])
        // 2 and 3 are held (the middle and end of a row); 4 to 6 are new.
        #expect(try hub.push(Array(changes[1...5])) == [2, 3, 5, 6, 7])
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        #expect(try admin.execute("SELECT count(*) FROM datastack_sync_chunk").int64(row: 0, column: 0) == 3)
        let pulled = try hub.pull(after: 0, limit: 100)
        #expect(pulled.map(\.sequence) == [1, 2, 3, 4, 5, 6, 7])
        #expect(pulled.filter { $0.change.replica == a }.map(\.change) == changes)
        #expect(try hub.register(replica: a, modelVersion: "v1").lastPushedLocalSequence == 6)
    }

    @Test func aRowWhoseHeaderNamesAnotherCountOrReplicaIsReportedNamingTheRow() throws {
        let (hub, url) = try makeHub()
        let a = UUID(), b = UUID()
        _ = try hub.push([change(a, 1)])
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        // Filed as two changes, 2 and 3, but its bytes are one change.
        try admin.execute("INSERT INTO datastack_sync_chunk VALUES (2, 3, $1::uuid, 2, 3, $2)",
                          [.text(a.uuidString), .bytes(try SyncCodec.modelFree.encode([change(a, 2)], firstSequence: 2))])
        // Filed under replica a, but its bytes are replica b's.
        try admin.execute("INSERT INTO datastack_sync_chunk VALUES (4, 4, $1::uuid, 4, 4, $2)",
                          [.text(a.uuidString), .bytes(try SyncCodec.modelFree.encode([change(b, 4)], firstSequence: 4))])
        try admin.execute("UPDATE datastack_sync_meta SET last_sequence = 4")
        let count = syncError { try hub.pull(after: 1, limit: 10) }
        #expect(count?.code == .corruptChange)
        #expect(count?.message.contains("sequences 2...3") == true)
        #expect(count?.message.contains("holds 1 changes") == true)
        let replica = syncError { try hub.pull(after: 3, limit: 10) }
        #expect(replica?.code == .corruptChange)
        #expect(replica?.message.contains("sequences 4...4") == true)
        #expect(replica?.message.contains(b.uuidString) == true)
    }

    @Test func objectsAreNamedByTheirInsertsSequencesAcrossChunksOfOnePull() throws {
        let (hub, _) = try makeHub()
        let a = UUID()
        let model = ManagedObjectModel(entities: [EntityDescription(name: "Item", properties: [
            AttributeDescription(name: "name", type: .string), AttributeDescription(name: "rank", type: .integer64),
            RelationshipDescription(name: "next", destination: "Item")])])
        let inserts = (1...3).map { change(a, Int64($0)) }
        #expect(try hub.push(inserts, encodedBy: SyncCodec(model: model)) == [1, 2, 3])
        // The pusher knows its inserts' numbers from the answer; its next chunk names them so.
        let numbers = Numbers(Dictionary(uniqueKeysWithValues: inserts.enumerated().map { (Int64($0 + 1), $1.objectID) }))
        let pusher = SyncCodec(model: model, numbering: numbers)
        let update = SyncChange(objectID: inserts[2].objectID, entity: "Item", kind: .update, values: ["next": .object(inserts[0].objectID)],
                                timestamp: HybridTimestamp(milliseconds: 1_790_000_000_009, counter: 0, replica: a),
                                localSequence: 4, baseSequence: 0)
        #expect(try hub.push([update], encodedBy: pusher) == [4])
        // A puller that knows no number yet learns them from the first chunk of the same pull.
        let all = try hub.pull(after: 0, limit: 10, decodedBy: SyncCodec(model: model))
        #expect(all.map(\.change) == inserts + [update])
        // Pulling only the update needs numbers learned before: one that does not know them is told which.
        let error = syncError { try hub.pull(after: 3, limit: 10, decodedBy: SyncCodec(model: model)) }
        #expect(error?.code == .corruptChange)
        #expect(error?.message.contains("object number 3") == true)
        #expect(try hub.pull(after: 3, limit: 10, decodedBy: pusher).map(\.change) == [update])
    }

    @Test func aDatabaseWithTheOldPerChangeLogIsRefusedNamingTheTable() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        try admin.execute("CREATE TABLE datastack_sync_log (sequence bigint PRIMARY KEY, change bytea NOT NULL)")
        let error = syncError { try PostgreSQLSyncHub(url: url) }
        #expect(error?.code == .hubFailure)
        #expect(error?.message.contains("datastack_sync_log") == true)
        #expect(error?.message.contains("datastack_sync_chunk") == true)
    }

    // MARK: Order under concurrency

    /// The interleaving a `bigserial` log loses a change in: a pusher holds the
    /// lock with sequence 1 written but not committed; a second pusher must wait,
    /// not commit sequence 2 first, where a puller would read it and skip 1.
    @Test func aPushWaitsForTheOneAheadSoNoPullerSeesALaterSequenceFirst() throws {
        let (hub, url) = try makeHub()
        let pusher = try PostgreSQLSyncHub(url: url)
        let a = UUID(), b = UUID()
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        try admin.execute("BEGIN")
        try admin.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [.text(PostgreSQLSyncHub.pushLockName)])
        try admin.execute("INSERT INTO datastack_sync_chunk VALUES (1, 1, $1::uuid, 1, 1, $2)",
                          [.text(a.uuidString), .bytes(try SyncCodec.modelFree.encode([change(a, 1)], firstSequence: 1))])
        try admin.execute("UPDATE datastack_sync_meta SET last_sequence = 1")

        let push = BackgroundCall { try pusher.push([change(b, 1)]) }
        #expect(try admin.waitUntilAnotherSessionWaitsForALock())
        #expect(try hub.pull(after: 0, limit: 10).isEmpty)
        try admin.execute("COMMIT")

        let sequences = try #require(push.outcome(within: 10), "the push did not return within 10 s of the lock's release").get()
        #expect(sequences == [2])
        #expect(try hub.pull(after: 0, limit: 10).map(\.sequence) == [1, 2])
    }

    @Test func concurrentPushersGiveEveryPullerAGapFreeLogWithEachChangeOnce() throws {
        let (_, url) = try makeHub()
        let pushers = 3, changesPerPusher = 40, chunk = 4
        let total = pushers * changesPerPusher
        let calls = (0..<pushers).map { _ in
            let replica = UUID()
            return BackgroundCall { () throws -> [Int64] in
                let hub = try PostgreSQLSyncHub(url: url)
                var sequences: [Int64] = []
                for start in stride(from: 1, through: changesPerPusher, by: chunk) {
                    sequences += try hub.push((start..<start + chunk).map { change(replica, Int64($0)) })
                }
                return sequences
            }
        }
        // A puller reading while they push: every page continues where the last ended.
        let puller = BackgroundCall { () throws -> [SequencedChange] in
            let hub = try PostgreSQLSyncHub(url: url)
            var pulled: [SequencedChange] = []
            let deadline = ContinuousClock.now + .seconds(60)
            while pulled.count < total, ContinuousClock.now < deadline {
                let last = pulled.last?.sequence ?? 0
                let page = try hub.pull(after: last, limit: 7)
                if page.isEmpty {
                    _ = try hub.waitForChanges(after: last, timeout: .seconds(2))
                    continue
                }
                guard page.map(\.sequence) == Array(last + 1...last + Int64(page.count)) else {
                    throw SyncError(.hubFailure, message: "after \(last) a pull gave \(page.map(\.sequence))")
                }
                pulled += page
            }
            return pulled
        }
        var pushed: [Int64] = []
        for call in calls {
            pushed += try #require(call.outcome(within: 60), "a pusher did not finish within 60 s").get()
        }
        #expect(pushed.sorted() == Array(1...Int64(total)))
        let pulled = try #require(puller.outcome(within: 60), "the puller did not finish within 60 s").get()
        #expect(pulled.map(\.sequence) == Array(1...Int64(total)))
        let names = Set(pulled.map { "\($0.change.replica) \($0.change.localSequence)" })
        #expect(names.count == total)
    }

    @Test func replicasStartingAtOnceAllFindTheTables() throws {
        let url = try PostgreSQLTestServer.shared.get().makeDatabase()
        let opens = (0..<4).map { _ in BackgroundCall { _ = try PostgreSQLSyncHub(url: url) } }
        for open in opens {
            try #require(open.outcome(within: 30), "a hub did not open within 30 s").get()
        }
    }

    // MARK: Registering

    @Test func aReplicaWithAnotherModelVersionIsRefusedNamingBoth() throws {
        let (hub, _) = try makeHub()
        let a = UUID(), b = UUID()
        let registration = try hub.register(replica: a, modelVersion: "shop-7")
        #expect(registration == SyncRegistration(modelVersion: "shop-7", acknowledgedSequence: 0, lastPushedLocalSequence: 0, oldestSequence: 1))

        let error = syncError { try hub.register(replica: b, modelVersion: "shop-8") }
        #expect(error?.code == .modelVersionMismatch)
        #expect(error?.isTransient == false)
        #expect(error?.message.contains("\"shop-8\"") == true)
        #expect(error?.message.contains("\"shop-7\"") == true)
        #expect(error?.message.contains(b.uuidString) == true)
        // The refused replica was not registered: it holds nothing back.
        _ = try hub.push([change(a, 1)])
        try hub.acknowledge(replica: a, through: 1)
        #expect(try hub.purge() == 1)
        #expect(try hub.register(replica: a, modelVersion: "shop-7").acknowledgedSequence == 1)
    }

    // MARK: Acknowledging and purging

    @Test func purgeKeepsWhatALaggingReplicaNeedsThenItNeedsASnapshot() throws {
        let (hub, _) = try makeHub()
        let fast = UUID(), lagging = UUID()
        #expect(try hub.purge() == 0)  // no replica registered: nothing goes
        _ = try hub.register(replica: fast, modelVersion: "v1")
        _ = try hub.register(replica: lagging, modelVersion: "v1")
        _ = try hub.push((1...5).map { change(fast, Int64($0)) })
        try hub.acknowledge(replica: fast, through: 5)
        try hub.acknowledge(replica: lagging, through: 2)
        try hub.acknowledge(replica: lagging, through: 1)  // going back changes nothing

        #expect(try hub.purge() == 2)
        #expect(try hub.purge() == 0)
        #expect(try hub.pull(after: 2, limit: 10).map(\.sequence) == [3, 4, 5])
        #expect(try hub.register(replica: lagging, modelVersion: "v1").oldestSequence == 3)
        #expect(try hub.register(replica: lagging, modelVersion: "v1").acknowledgedSequence == 2)

        try hub.acknowledge(replica: lagging, through: 5)
        #expect(try hub.purge() == 3)
        let error = syncError { try hub.pull(after: 2, limit: 10) }
        #expect(error?.code == .snapshotRequired)
        #expect(error?.message.contains("after sequence 2") == true)
        #expect(error?.message.contains("oldest sequence it keeps is 6") == true)
        #expect(try hub.pull(after: 5, limit: 10).isEmpty)
        // The log is empty, but a sequence is never given twice.
        #expect(try hub.push([change(fast, 6)]) == [6])
    }

    @Test func badAcknowledgmentsAndPullsAreRefusedNamingWhat() throws {
        let (hub, _) = try makeHub()
        let a = UUID(), stranger = UUID()
        _ = try hub.register(replica: a, modelVersion: "v1")
        _ = try hub.push([change(a, 1)])

        let unknown = syncError { try hub.acknowledge(replica: stranger, through: 1) }
        #expect(unknown?.code == .hubFailure)
        #expect(unknown?.message.contains(stranger.uuidString) == true)
        #expect(unknown?.message.contains("not registered") == true)
        let beyond = syncError { try hub.acknowledge(replica: a, through: 2) }
        #expect(beyond?.code == .hubFailure)
        #expect(beyond?.message.contains("sequence 2") == true)
        #expect(beyond?.message.contains("last sequence given, 1") == true)
        #expect(syncError { try hub.acknowledge(replica: a, through: -1) }?.code == .hubFailure)

        let noLimit = syncError { try hub.pull(after: 0, limit: 0) }
        #expect(noLimit?.code == .hubFailure)
        #expect(noLimit?.message.contains("limit: 0") == true)
        #expect(syncError { try hub.pull(after: -1, limit: 10) }?.code == .hubFailure)
        // Refusals leave the hub as it was.
        #expect(try hub.register(replica: a, modelVersion: "v1").acknowledgedSequence == 0)
        #expect(try hub.pull(after: 0, limit: 10).count == 1)
    }

    // MARK: Damaged data and server errors

    @Test func aCorruptRowIsReportedNamingItsSequence() throws {
        let (hub, url) = try makeHub()
        let a = UUID()
        _ = try hub.push([change(a, 1), change(a, 2)])
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        try admin.execute("INSERT INTO datastack_sync_chunk VALUES (3, 3, $1::uuid, 3, 3, $2)", [.text(a.uuidString), .bytes([0xFF, 0x01, 0x02])])
        try admin.execute("UPDATE datastack_sync_meta SET last_sequence = 3")

        let error = syncError { try hub.pull(after: 0, limit: 10) }
        #expect(error?.code == .corruptChange)
        #expect(error?.message.contains("sequences 3...3") == true)
        // The changes before it still pull.
        #expect(try hub.pull(after: 0, limit: 2).map(\.sequence) == [1, 2])
    }

    @Test func aRowWhoseBytesNameAnotherChangeIsReportedNamingItsSequence() throws {
        let (hub, url) = try makeHub()
        let a = UUID()
        _ = try hub.push([change(a, 1)])
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        // Filed as local change 2, but its bytes are local change 7: a re-push of 7 would not find it.
        try admin.execute("INSERT INTO datastack_sync_chunk VALUES (2, 2, $1::uuid, 2, 2, $2)",
                          [.text(a.uuidString), .bytes(try SyncCodec.modelFree.encode([change(a, 7)], firstSequence: 2))])
        try admin.execute("UPDATE datastack_sync_meta SET last_sequence = 2")

        let error = syncError { try hub.pull(after: 0, limit: 10) }
        #expect(error?.code == .corruptChange)
        #expect(error?.message.contains("sequences 2...2") == true)
        #expect(error?.message.contains("local sequences 7...7") == true)
    }

    @Test func anotherServerErrorIsAHubFailureNamingTheSQL() throws {
        let (hub, url) = try makeHub()
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        try admin.execute("DROP TABLE datastack_sync_chunk")
        let error = syncError { try hub.push([change(UUID(), 1)]) }
        #expect(error?.code == .hubFailure)
        #expect(error?.message.contains("datastack_sync_chunk") == true)
        #expect(error?.message.contains("while executing") == true)
    }

    @Test func aStoppedServerIsOfflineAndTheHubComesBackWithIt() throws {
        let server = try PostgreSQLTestServer.start()
        defer { server.stop() }
        let url = try server.makeDatabase()
        let hub = try PostgreSQLSyncHub(url: url)
        let a = UUID()
        #expect(try hub.push([change(a, 1)]) == [1])
        // A wait under way when the server stops ends with .offline, never "nothing came".
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        let wait = BackgroundCall { try hub.waitForChanges(after: 1, timeout: .seconds(30)) }
        #expect(try admin.waitUntilTheHubListens())

        try server.stopKeepingData()
        let waited = try #require(wait.outcome(within: 10), "waitForChanges did not end within 10 s of the server's stop")
        switch waited {
        case .failure(let error as SyncError): #expect(error.code == .offline)
        default: Issue.record("expected .offline from the wait, got \(waited)")
        }
        for error in [syncError { try hub.push([change(a, 2)]) },
                      syncError { try hub.pull(after: 0, limit: 10) },
                      syncError { try hub.waitForChanges(after: 1, timeout: .seconds(5)) },
                      syncError { try hub.register(replica: a, modelVersion: "v1") },
                      syncError { try PostgreSQLSyncHub(url: url) }] {
            #expect(error?.code == .offline)
            #expect(error?.isTransient == true)
            #expect(error?.message.contains("cannot be reached") == true)
        }

        try server.restart()
        // The change whose push failed is pushed again, with the one before it: kept once each.
        #expect(try hub.push([change(a, 1), change(a, 2)]) == [1, 2])
        #expect(try hub.waitForChanges(after: 1, timeout: .seconds(10)))
    }

    @Test func anUnreachableHubIsOfflineWithoutItsPasswordInTheMessage() throws {
        let url = try #require(URL(string: "postgresql://sync:s3cret@/hub?host=%2Ftmp%2Fds-no-such-server"))
        let error = syncError { try PostgreSQLSyncHub(url: url) }
        #expect(error?.code == .offline)
        #expect(error?.message.contains("creating the hub's tables") == true)
        #expect(error?.message.contains("s3cret") == false)
        #expect(error?.message.contains("sync:***@") == true)
    }

    /// A link dropped mid-push (the push's session ended on the server while its
    /// transaction is open): nothing of the push stays, the push is `.offline`,
    /// and pushing the same chunk again on a new session appends it once.
    @Test func aPushWhoseSessionDiesMidTransactionLeavesNothingAndIsPushedAgainOnce() throws {
        let (hub, url) = try makeHub()
        let a = UUID()
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        try admin.execute("SELECT pg_advisory_lock(hashtext($1))", [.text(PostgreSQLSyncHub.pushLockName)])
        let chunk = [change(a, 1), change(a, 2)]
        let push = BackgroundCall { try hub.push(chunk) }
        #expect(try admin.waitUntilAnotherSessionWaitsForALock())
        let ended = try admin.execute("""
            SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
            WHERE application_name = 'datastack_sync' AND datname = current_database()
            """).int64(row: 0, column: 0)
        #expect(ended == 1)
        try admin.execute("SELECT pg_advisory_unlock(hashtext($1))", [.text(PostgreSQLSyncHub.pushLockName)])

        let outcome = try #require(push.outcome(within: 10), "the push did not return within 10 s of its session's end")
        switch outcome {
        case .failure(let error as SyncError): #expect(error.code == .offline)
        default: Issue.record("expected .offline from the push, got \(outcome)")
        }
        #expect(try admin.execute("SELECT count(*) FROM datastack_sync_chunk").int64(row: 0, column: 0) == 0)
        #expect(try hub.push(chunk) == [1, 2])
        #expect(try hub.push(chunk) == [1, 2])
        #expect(try hub.pull(after: 0, limit: 10).map(\.change) == chunk)
    }

    @Test func aPushThatWaitsLongerThanTheLockTimeoutIsOfflineAsBusy() throws {
        let (_, url) = try makeHub()
        var options = PostgreSQLSyncHubOptions()
        options.lockTimeout = .milliseconds(200)
        let hub = try PostgreSQLSyncHub(url: url, options: options)
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        try admin.execute("SELECT pg_advisory_lock(hashtext($1))", [.text(PostgreSQLSyncHub.pushLockName)])

        let error = syncError { try hub.push([change(UUID(), 1)]) }
        #expect(error?.code == .offline)
        #expect(error?.message.contains("busy") == true)
        try admin.execute("SELECT pg_advisory_unlock(hashtext($1))", [.text(PostgreSQLSyncHub.pushLockName)])
        #expect(try hub.push([change(UUID(), 1)]) == [1])
    }

    // MARK: Waiting for changes

    @Test func waitForChangesWakesOnAPushFromAnotherConnection() throws {
        let (waiter, url) = try makeHub()
        let pusher = try PostgreSQLSyncHub(url: url)
        let admin = try PostgreSQLConnection(url: url)
        defer { admin.close() }
        let clock = ContinuousClock()

        let wait = BackgroundCall { try waiter.waitForChanges(after: 0, timeout: .seconds(30)) }
        #expect(try admin.waitUntilTheHubListens())
        let pushed = clock.now
        _ = try pusher.push([change(UUID(), 1)])
        let woke = try #require(wait.outcome(within: 30), "waitForChanges did not return within 30 s").get()
        let latency = clock.now - pushed
        #expect(woke)  // false only when the 30 s passed
        #expect(latency < .seconds(5))
        print("PostgreSQLSyncHub: waitForChanges woke \(latency) after the push started")

        // Changes there already: returns at once.
        #expect(try waiter.waitForChanges(after: 0, timeout: .seconds(30)))
    }

    @Test func waitForChangesTimesOutWhenNothingComes() throws {
        let (hub, _) = try makeHub()
        _ = try hub.push([change(UUID(), 1)])
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try hub.waitForChanges(after: 1, timeout: .milliseconds(300)) == false)
        #expect(clock.now - start >= .milliseconds(300))
        #expect(try hub.waitForChanges(after: 1, timeout: .zero) == false)
        // A push after the timeout is seen: the false above was "nothing came", not a deaf session.
        _ = try hub.push([change(UUID(), 1)])
        #expect(try hub.waitForChanges(after: 1, timeout: .seconds(10)))
    }
}
