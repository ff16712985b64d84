@_spi(DataStackInternal) import DataStackSupport
import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Errors are structs with codes (STYLE rule 16): a code matches in a `catch`
/// and a `switch`, only its own error type, and what a case used to carry is a field.
@Suite struct ObjectGraphErrorTests {
    @Test func aCodeMatchesAThrownErrorInACatchClause() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        let caught = context.performAndWait { () -> ObjectGraphError.Code? in
            do {
                try Gadget(context: context).setValue(1, forKey: "colour")
            } catch ObjectGraphError.Code.wrongValueType {
                return .wrongValueType
            } catch ObjectGraphError.Code.unknownKey {
                return .unknownKey
            } catch {
                Issue.record("not an ObjectGraphError: \(error)")
            }
            return nil
        }
        #expect(caught == .unknownKey)
    }

    @Test func aCodeMatchesOnlyItsOwnErrorType() {
        let storeError: any Error = PersistentStoreError.readOnly(url: nil)
        let contextError: any Error = ObjectGraphError.readOnly("context main")
        #expect(PersistentStoreError.Code.readOnly ~= storeError)
        #expect(!(ObjectGraphError.Code.readOnly ~= storeError))
        #expect(ObjectGraphError.Code.readOnly ~= contextError)
        #expect(!(PersistentStoreError.Code.readOnly ~= contextError))
        #expect(!(ObjectGraphError.Code.noStore ~= contextError))
    }

    @Test func aSwitchOverACodeTakesADefault() {
        func retries(_ error: ObjectGraphError) -> Bool {
            switch error.code {
            case .mergeConflict, .uniquenessConflict: true
            default: false
            }
        }
        #expect(retries(.mergeConflict([])))
        #expect(retries(.uniquenessConflict([])))
        #expect(!retries(.noStore(entity: "Ticker")))
    }

    @Test func whatACaseCarriedIsAField() throws {
        let id = try ObjectGraphErrorTests.objectID()
        let problem = ValidationError(objectID: id, key: "name", reason: "a value is required")
        let invalid = ObjectGraphError.validationFailed([problem])
        #expect(invalid.code == .validationFailed && invalid.validationErrors == [problem])
        #expect(invalid.description == "validation failed: \(problem)")

        let conflict = MergeConflict(objectID: id, objectSnapshotVersion: 1, persistedSnapshotVersion: 2)
        #expect(ObjectGraphError.mergeConflict([conflict]).mergeConflicts == [conflict])

        let missing = ObjectGraphError.objectNotFound(id)
        #expect(missing.objectID == id && missing.entityName == id.entityName)

        let unknown = ObjectGraphError.unknownKey("colour", entity: "Gadget")
        #expect(unknown.key == "colour" && unknown.entityName == "Gadget")
        #expect(unknown.description == "entity Gadget has no property named 'colour'")

        #expect(ObjectGraphError.invalidModel(["a", "b"]).modelProblems == ["a", "b"])
    }

    /// Two codes with one name would match each other's errors.
    @Test func everyCodeHasItsOwnName() {
        let codes: [ObjectGraphError.Code] = [
            .invalidModel, .unknownKey, .unknownEntity, .wrongValueType, .valueOutOfRange, .objectNotFound,
            .differentContexts, .noContext, .noStore, .readOnly, .validationFailed, .mergeConflict, .wrongResultType,
            .invalidObjectURI, .uniquenessConflict, .predicateDoesNotCompile, .notAnAttribute, .notComputedFromTheRow,
            .deleteDenied, .unsupportedStore, .nothingToUpdate, .severalStores, .missingValue, .duplicateKey, .abstractEntity,
        ]
        #expect(Set(codes).count == codes.count)
        #expect(Set(codes.map(\.description)).count == codes.count)
        #expect(ObjectGraphError.Code.mergeConflict.description == "mergeConflict")
        #expect(PersistentStoreError.Code.historyExpired.description == "historyExpired")
    }

    private static func objectID() throws -> ObjectID {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        return context.performAndWait { Gadget(context: context).objectID }
    }
}
