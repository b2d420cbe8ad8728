import Testing
@testable import Inspect
