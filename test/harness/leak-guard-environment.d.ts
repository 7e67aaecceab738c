// Types for the jest environment (plain JavaScript: jest loads it untransformed).
import { TestEnvironment } from 'jest-environment-node';

export default class LeakGuardEnvironment extends TestEnvironment {}
