import os

NAME_9 = 'm9'
