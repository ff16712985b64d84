import Foundation
import Testing
import DataStack

@Test func dataStackReexportsObjectGraph() {
    let model = ManagedObjectModel(entities: [EntityDescription(name: "Thing")])
    #expect(model.entitiesByName["Thing"] != nil)
}

/// Every error type of every layer is a `CodedError`, and so a
/// `LocalizedError` whose text is its `description`: what an app shows with
/// `localizedDescription` is what a log prints.
@Test func codedErrorsOfEveryLayerDescribeThemselvesAlikeEverywhere() {
    let errors: [any CodedError] = [
        StackError(.notSetUp, message: "the stack is not set up"),
        PersistentStoreError(.busy, url: URL(fileURLWithPath: "/tmp/A.sqlite"), message: "the database is locked"),
        SQLitePragmaError(.invalidName, name: "x;", value: "1", message: "a pragma's name is letters"),
        PropertyListError(.outOfBounds, message: "ends early"),
    ]
    #expect(errors.map(\.localizedDescription) == [
        "the stack is not set up",
        "the database is locked (store at /tmp/A.sqlite)",
        "bad SQLite pragma 'PRAGMA x; = 1': a pragma's name is letters",
        "binary property list: ends early",
    ])
    #expect(errors.allSatisfy { $0.errorDescription == $0.description })
}
